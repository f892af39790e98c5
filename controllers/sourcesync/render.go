package sourcesync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/rollout"
)

// Renderer is a source whose bundle is built for each destination as that cluster is: a
// Helm chart, rendered with the cluster's version, APIs and values.
type Renderer interface {
	Resolver
	// Namespace is where obj's objects that name no namespace go on every cluster.
	Namespace(obj Object) string
	// Prepare says what obj's bundle of rev for one destination is built from, without
	// building it; its error names the cluster.
	Prepare(ctx context.Context, obj Object, rev Revision, target fanout.Target) (Build, error)
}

// Build is how one destination's bundle is built.
type Build struct {
	// Key identifies the inputs: equal keys build equal bundles, and a cluster whose
	// bundle was built from the key is not built for again.
	Key string
	// Content identifies what the sync delivers, whatever the cluster: equal for every
	// destination of one revision of the source and of the sync's spec (the chart
	// version, the release and the values before the cluster's are put in).
	Content string
	// Scope is who may share a bundle built in this process beside the key: the
	// credentials it was fetched with, so that no sync gets through another's rendering
	// a chart its own credentials do not open.
	Scope string
	// Run builds the bundle; upgrade says whether the cluster had an earlier one.
	Run func(ctx context.Context, upgrade bool) ([]byte, error)
}

// renderings are what was built for each destination: the items to deliver, the
// destinations that got none, with why, and what the sync delivers whatever the cluster.
type renderings struct {
	items    []fanout.Item
	failures []targetFailure
	contents map[string]bool
}

// contentHash identifies what the sync delivers: its content as the builds say it, else
// (nothing built) as the rollout last recorded it, so that a cluster joining, leaving or
// failing is never a new revision.
func (rs renderings) contentHash(obj Object) string {
	if len(rs.contents) == 0 {
		if st := obj.SourceStatus().Rollout; st != nil {
			return st.ContentHash
		}
		return ""
	}
	return rollout.ContentHash(map[string]string{"content": strings.Join(slices.Sorted(maps.Keys(rs.contents)), ",")})
}

type targetFailure struct {
	target string
	err    error
}

// syncRendered delivers a renderer's bundles: one per destination, built only from
// inputs not built before. When the source cannot be asked, every destination keeps what
// it has (and a rollout goes on with it); a destination whose bundle cannot be built
// keeps its own, and is named in the sync's condition.
func (r *Reconciler) syncRendered(ctx context.Context, obj Object, interval time.Duration) (ctrl.Result, error) {
	status := obj.SourceStatus()
	previous := previousBundles(status)
	rev, srcErr := r.Renderer.Resolve(ctx, obj)
	d, targets, err := r.delivery(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	var out renderings
	if srcErr == nil {
		r.recordRevision(obj, rev)
		out = r.renderAll(ctx, obj, rev, targets, previous)
	} else {
		out.items = r.carried(obj, targets, previous)
	}
	d.SetContentHash(out.contentHash(obj))
	if result, stalled := r.stallTooLarge(obj, d, out.items, targets, interval); stalled {
		return result, nil
	}
	var rollout *vidrav1alpha1.RolloutStatus
	if status.Bundles, rollout = d.Deliver(ctx, out.items, targets, previous); rollout != nil {
		status.Rollout = rollout
	}
	pruneErr := d.Prune(ctx)
	switch {
	case srcErr != nil:
		return r.fail(obj, srcErr, min(interval, max(d.Requeue(), time.Second)))
	case len(out.failures) > 0:
		return r.failTargets(obj, out.failures, interval)
	}
	name := ""
	if status.Source != nil {
		name = status.Source.Revision
	}
	return r.summarize(obj, d, name, pruneErr, interval)
}

// recordRevision records in status.source the revision the source named.
func (r *Reconciler) recordRevision(obj Object, rev Revision) {
	status := obj.SourceStatus()
	now := metav1.NewTime(r.now())
	status.LastSyncTime = &now
	if status.Source == nil || status.Source.Key != rev.Key {
		status.Source = &vidrav1alpha1.SourceStatus{FetchedAt: &now}
	}
	status.Source.Revision, status.Source.Key, status.Source.Digest = rev.Name, rev.Key, rev.Digest
}

// renderAll builds each destination's bundle, unless it was built from the same inputs.
func (r *Reconciler) renderAll(ctx context.Context, obj Object, rev Revision, targets []fanout.Target, previous map[string]vidrav1alpha1.ArtifactStatus) renderings {
	out := renderings{contents: map[string]bool{}}
	for _, t := range targets {
		it := r.targetItem(obj, rev.Name, t)
		prev := previous[it.ID]
		b, err := r.Renderer.Prepare(ctx, obj, rev, t)
		if err == nil {
			it.Checksum, it.Digest, err = r.rendered(ctx, b, prev)
		}
		if err != nil {
			// Listed still, so that what it has stays, whatever status says of it.
			out.failures = append(out.failures, targetFailure{target: t.Name(), err: err})
			it.Unready = err.Error()
		} else {
			it.BuiltFrom = b.Key
			out.contents[b.Content] = true
		}
		out.items = append(out.items, it)
	}
	return out
}

// rendered returns the checksum and digest of a destination's bundle: the one built before
// from the same inputs, else built now and stored.
func (r *Reconciler) rendered(ctx context.Context, b Build, prev vidrav1alpha1.ArtifactStatus) (checksum, digest string, err error) {
	if prev.BuiltFrom == b.Key && prev.Digest != "" {
		if info, err := r.Content.Stat(ctx, prev.Digest); err == nil {
			return info.MD5, prev.Digest, nil
		}
	}
	// A cluster that had a bundle is upgraded: charts may tell an install from an upgrade.
	upgrade := prev.Checksum != "" || prev.StableChecksum != ""
	memo := fmt.Sprintf("render\x00%s\x00%s\x00%t", b.Key, b.Scope, upgrade)
	if known, ok := r.builds().Get(memo); ok {
		if f, failed := known.(failedBuild); failed {
			if f.until.IsZero() || r.now().Before(f.until) {
				return "", "", f.err
			}
			r.builds().Remove(memo)
		} else if info, err := r.Content.Stat(ctx, known.(string)); err == nil {
			return info.MD5, known.(string), nil
		}
	}
	data, err := b.Run(ctx, upgrade)
	r.Metrics.observeFetch(r.Kind.Kind, err)
	if err == nil {
		if _, decodeErr := manifest.Decode(data); decodeErr != nil {
			err = &Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("the rendered chart is not Kubernetes manifests: %w", decodeErr)}
		}
	}
	if err != nil {
		if f, ok := r.remembered(err); ok {
			r.builds().Add(memo, f)
		}
		return "", "", err
	}
	if digest, err = r.Content.Put(ctx, data); err != nil {
		return "", "", &Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("store bundle: %w", err)}
	}
	r.builds().Add(memo, digest)
	return content.MD5(data), digest, nil
}

// carried are the bundles the destinations had, delivered as they are while the source
// cannot be asked.
func (r *Reconciler) carried(obj Object, targets []fanout.Target, previous map[string]vidrav1alpha1.ArtifactStatus) []fanout.Item {
	var items []fanout.Item
	for _, t := range targets {
		it := r.targetItem(obj, "", t)
		prev, ok := previous[it.ID]
		if !ok || prev.Checksum == "" {
			continue
		}
		it.Target, it.Checksum, it.Digest, it.BuiltFrom = prev.Target, prev.Checksum, prev.Digest, prev.BuiltFrom
		items = append(items, it)
	}
	return items
}

// targetItem is the item that delivers a sync's bundle to one destination: its ID names
// the kind and the destination, so VidraResources never collide across kinds.
func (r *Reconciler) targetItem(obj Object, revision string, t fanout.Target) fanout.Item {
	return fanout.Item{
		ID:          strings.ToLower(r.Kind.Kind) + "/" + t.Key(),
		Name:        obj.GetName(),
		Target:      revision,
		Destination: &t,
	}
}

// failTargets reports the destinations whose bundle could not be built, naming each; the
// others were delivered.
func (r *Reconciler) failTargets(obj Object, failures []targetFailure, interval time.Duration) (ctrl.Result, error) {
	reason, stalled, transient := "", true, false
	msgs := make([]string, 0, len(failures))
	for _, tf := range failures {
		var f *Failure
		if !errors.As(tf.err, &f) {
			f = &Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: tf.err}
		}
		if reason == "" {
			reason = f.Reason
		}
		stalled = stalled && f.Stalled
		transient = transient || f.Transient
		msgs = append(msgs, fmt.Sprintf("cluster %s: %v", tf.target, tf.err))
	}
	msg := strings.Join(msgs, "; ") + "; what was delivered there before stays as it is"
	if stalled {
		markStalled(obj, reason, msg)
	} else {
		markFailed(obj, reason, msg)
	}
	r.warn(obj, reason, msg)
	if transient {
		return ctrl.Result{}, errors.Join(failureErrs(failures)...)
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

func failureErrs(failures []targetFailure) []error {
	out := make([]error, 0, len(failures))
	for _, f := range failures {
		out = append(out, f.err)
	}
	return out
}

// storedItems gives the fan-out each item's bundle from the content store, where every
// source sync keeps what it built.
type storedItems struct {
	store *content.Store
}

func (s storedItems) Fetch(ctx context.Context, it fanout.Item) ([]byte, error) {
	if it.Digest == "" {
		return nil, fmt.Errorf("bundle %s: %w", it.ID, content.ErrUnavailable)
	}
	data, err := s.store.Get(ctx, it.Digest)
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", it.Digest, err)
	}
	return data, nil
}
