// Package sourcesync is the kinds of sync whose source names one revision at a time —
// GitSync, OCISync and HelmSync — as the one sync reconciler (package syncs) reads them:
// it asks the source which revision the sync names, fetches and builds that revision only
// when it is new (once for every sync that reads it), and stores the bundle in the content
// store, for every destination alike or, for a Renderer, built for each. A kind of its own
// brings only its Source.
package sourcesync

import (
	"sync"
	"time"

	"k8s.io/utils/lru"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// Kind is one kind of sync of a source, as the sync reconciler reads it.
type Kind struct {
	// Sync names the kind; its objects are Objects.
	Sync vidrav1alpha1.SyncKind
	// Source resolves and fetches what the kind's syncs name: one bundle for every
	// destination; or Renderer, which builds one for each.
	Source   Source
	Renderer Renderer
	// PostBuild, when set, substitutes variables in the Source's bundle for each
	// destination of a sync that has a spec.postBuild.
	PostBuild *PostBuild
	// Content stores every bundle, which VidraResources and rollouts then name.
	Content *content.Store
	// Metrics, when set, count fetches.
	Metrics *Metrics
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	// built holds, for the revision keys met last, the digest of the bundle built, or the
	// failure no retry of the same revision can mend (a build error, a bound): syncs
	// reading the same revision and path build it once, and a bad revision is not
	// fetched again at every interval. Bounded, so that commits do not pile up.
	builtOnce sync.Once
	built     *lru.Cache
}

var _ syncs.Kind = (*Kind)(nil)

// builtKeys bounds the revision keys remembered: far more than the syncs that share one.
const builtKeys = 1024

func (k *Kind) builds() *lru.Cache {
	k.builtOnce.Do(func() { k.built = lru.New(builtKeys) })
	return k.built
}

func (k *Kind) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// SyncKind names the kind.
func (k *Kind) SyncKind() vidrav1alpha1.SyncKind { return k.Sync }

// Spec is what the reconciler reads of the sync's spec.
func (k *Kind) Spec(obj syncs.Object) syncs.Spec {
	opts := obj.(Object).Options()
	spec := syncs.Spec{
		Reach: policy.SyncReach(opts.Destination.Destination, opts.Destination.ClusterSelector != nil, opts.Template),
	}
	if opts.Interval != nil {
		spec.Interval = opts.Interval.Duration
	}
	dest := opts.Destination.Destination
	if k.Renderer != nil {
		dest.Namespace = k.Renderer.Namespace(obj.(Object))
	}
	spec.Delivery = fanout.Sync{
		Object:     obj,
		SourceName: k.Sync.Kind + " " + obj.GetName() + "'s source",
		Noun:       "bundle",
		Destination: fanout.Destination{
			Destination: dest, ClusterSelector: opts.Destination.ClusterSelector,
		},
		Template: opts.Template,
	}
	return spec
}

// Status is the sync's status.
func (k *Kind) Status(obj syncs.Object) (any, *int64) {
	status := obj.(Object).SourceStatus()
	return status, &status.ObservedGeneration
}

// Mirror writes the Ready condition's error, if any, to status.source.message.
func (k *Kind) Mirror(obj syncs.Object) {
	src := obj.(Object).SourceStatus().Source
	if _, lastError, keep, ok := syncs.Outcome(obj); src != nil && ok && !keep {
		src.Message = lastError
	}
}

// Forget keeps nothing per sync.
func (k *Kind) Forget(string) {}

// Transient is false: a source's errors say whether they are (syncs.Failure).
func (k *Kind) Transient(error) bool { return false }
