package syncs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Previewer is a Kind whose syncs preview the commits of other refs of their source
// before they merge (a GitSync's spec.previews).
type Previewer interface {
	// PreviewRefs are the refs obj previews, each with the revision it names now
	// (ref@sha1:<commit>); none when obj previews none. limit is how many obj previews
	// at once: the refs past it in name order may have no revision.
	PreviewRefs(ctx context.Context, obj Object) (refs map[string]string, limit int, err error)
	// Pinned is a copy of obj that reads ref in place of its own, for a preview.
	Pinned(obj Object, ref string) Object
}

// DryRunner previews content on the cluster of a VidraResource as it would apply it
// there, applying nothing (the VidraResource controller's DryRun); nil when the
// cluster pulls its bundles, which the hub does not reach.
type DryRunner interface {
	DryRun(ctx context.Context, vr *vidrav1alpha1.VidraResource, data []byte, revision string) *vidrav1alpha1.PreviewStatus
	// Delivering says whether a delivery runs now, which a preview waits for.
	Delivering() bool
}

// Previews run the previews of one kind's syncs, off the reconciler's workers: a
// preview never holds a delivery. A sync's full pass asks for one (Request); the
// runner looks at the sync's refs and previews each new commit once.
type Previews struct {
	// DryRun dry-runs a bundle on a cluster.
	DryRun DryRunner
	// Clusters bounds the clusters one preview dry-runs at once (4 when 0).
	Clusters int
	// MaxAge is how long a preview of an unchanged commit is kept before it is made
	// again (a day when 0): the clusters change under it.
	MaxAge time.Duration
	// Metrics, when set, count the previews made.
	Metrics *PreviewMetrics
	Log     logr.Logger

	r     *Reconciler
	queue workqueue.TypedRateLimitingInterface[string]
}

// previewDelay is how long after a sync's pass its previews are looked at: a push asks
// for every sync of its repository at once, whose passes then run first and are
// yielded to (yield), rather than share the machine with a preview's build.
const previewDelay = 500 * time.Millisecond

// Request asks for a look at the previews of the sync named name; never blocks.
func (p *Previews) Request(name string) {
	if p != nil && p.queue != nil {
		p.queue.AddAfter(name, previewDelay)
	}
}

// NeedLeaderElection is true: the leader runs the syncs, and their previews.
func (p *Previews) NeedLeaderElection() bool { return true }

// Start previews the syncs asked for, one at a time, until ctx ends.
func (p *Previews) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for {
		name, quit := p.queue.Get()
		if quit {
			return nil
		}
		if err := p.previewSync(ctx, name); err != nil {
			p.Log.Error(err, "preview", "sync", name)
			p.queue.AddRateLimited(name)
		} else {
			p.queue.Forget(name)
		}
		p.queue.Done(name)
	}
}

// previewSync previews each ref of the sync whose commit has no fresh preview, drops
// the previews of refs gone, and writes status.previews.
func (p *Previews) previewSync(ctx context.Context, name string) error {
	kind := p.r.Kind.SyncKind()
	obj := kind.New().(Object)
	if err := p.r.HubReader.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	pv := p.r.Kind.(Previewer)
	status, on := previewsOf(obj)
	switch {
	case status == nil || obj.Suspended() || !obj.GetDeletionTimestamp().IsZero():
		return nil
	case !on:
		return p.write(ctx, obj, *status, nil) // spec.previews removed
	}
	refs, limit, err := pv.PreviewRefs(ctx, obj)
	if err != nil {
		err = fmt.Errorf("list the refs to preview: %w", err)
		p.recordFailure(obj, err)
		return err
	}
	names := slices.Sorted(maps.Keys(refs))
	left := 0
	if len(names) > limit {
		names, left = names[:limit], len(names)-limit
	}
	before := slices.Clone(*status)
	var next []vidrav1alpha1.RefPreview
	for _, ref := range names {
		if kept, ok := p.fresh(before, ref, refs[ref]); ok {
			next = append(next, kept)
			continue
		}
		start := time.Now()
		rp := p.previewRef(ctx, obj, pv.Pinned(obj, ref), ref, refs[ref])
		p.Metrics.observe(obj.SyncKind().Kind, rp, time.Since(start))
		p.record(obj, rp)
		next = append(next, rp)
	}
	if left > 0 && len(next) > 0 {
		next[len(next)-1].Message = strings.TrimPrefix(next[len(next)-1].Message+fmt.Sprintf("; %d more refs match spec.previews.refs and are not previewed (maxRefs)", left), "; ")
	}
	return p.write(ctx, obj, before, next)
}

// fresh is the preview kept of ref when it previews revision and is younger than MaxAge.
func (p *Previews) fresh(previews []vidrav1alpha1.RefPreview, ref, revision string) (vidrav1alpha1.RefPreview, bool) {
	maxAge := p.MaxAge
	if maxAge == 0 {
		maxAge = 24 * time.Hour
	}
	for _, rp := range previews {
		if rp.Ref == ref && rp.Revision == revision && rp.ComputedAt != nil && time.Since(rp.ComputedAt.Time) < maxAge {
			return rp, true
		}
	}
	return vidrav1alpha1.RefPreview{}, false
}

// write patches status.previews, when it changed.
func (p *Previews) write(ctx context.Context, obj Object, before, next []vidrav1alpha1.RefPreview) error {
	if apiequality.Semantic.DeepEqual(before, next) {
		return nil
	}
	base := obj.DeepCopyObject().(Object)
	status, _ := previewsOf(obj)
	*status = next
	if err := p.r.Hub.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("patch status.previews of %s: %w", obj.GetName(), err))
	}
	return nil
}

// previewsOf is obj's status.previews, when its kind previews (nil when not), and
// whether its spec asks for previews.
func previewsOf(obj Object) (*[]vidrav1alpha1.RefPreview, bool) {
	switch o := obj.(type) {
	case *vidrav1alpha1.GitSync:
		return &o.Status.Previews, o.Spec.Previews != nil
	case *vidrav1alpha1.InfrahubSync:
		return &o.Status.Previews, o.Spec.Previews != nil
	}
	return nil, false
}

// requestPreviews asks for a look at obj's previews when it has some, or asks for them.
func (r *Reconciler) requestPreviews(obj Object) {
	if status, on := previewsOf(obj); on || (status != nil && len(*status) > 0) {
		r.Previews.Request(obj.GetName())
	}
}

// setupPreviews readies the runner of the kind's previews, when it has one and the kind
// previews.
func (r *Reconciler) setupPreviews() (*Previews, bool) {
	status, _ := previewsOf(r.Kind.SyncKind().New().(Object))
	if _, ok := r.Kind.(Previewer); !ok || status == nil || r.Previews == nil || r.Previews.DryRun == nil {
		r.Previews = nil
		return nil, false
	}
	r.Previews.r = r
	r.Previews.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: strings.ToLower(r.Kind.SyncKind().Kind) + "-previews"})
	return r.Previews, true
}
