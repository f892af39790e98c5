package sourcesync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/manifest"
)

// defaultInlineLimit is the largest bundle a VidraResource holds inline when InlineLimit is
// 0: well under the API server's object limit, with room for its status.
const defaultInlineLimit = 256 << 10

// sync resolves the revision, fetches it when it is new, and delivers its bundle. When the
// source fails, the bundle fetched before is still delivered — a rollout's waves go on,
// clusters joining the selection get it — and the failure is what the sync reports.
func (r *Reconciler) sync(ctx context.Context, obj Object) (ctrl.Result, error) {
	opts := obj.Options()
	interval := defaultInterval
	if opts.Interval != nil {
		interval = opts.Interval.Duration
	}
	markReconciling(obj, "asking the source for its revision")
	if r.Renderer != nil {
		return r.syncRendered(ctx, obj, interval)
	}

	// Ask the source which revision the sync names, and get its bundle: from the content
	// store when it was fetched before, else fetched and built once.
	want, srcErr := r.fetch(ctx, obj)
	if srcErr != nil {
		var ok bool
		if want, ok = r.delivered(ctx, obj); !ok {
			return r.fail(obj, srcErr, interval)
		}
	}

	// Find what the sync made before, and where its bundle goes.
	d, targets, err := r.delivery(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}

	// Deliver the bundle, at once or wave by wave.
	status := obj.SourceStatus()
	// The item's ID is the kind's name: it names the VidraResources, so a GitSync and an
	// OCISync of one name never make the same one.
	item := fanout.Item{ID: strings.ToLower(r.Kind.Kind), Name: obj.GetName(), Target: want.revision, Checksum: want.checksum, Digest: want.digest}
	if result, stalled := r.stallTooLarge(obj, d, []fanout.Item{item}, targets, interval); stalled {
		return result, nil
	}
	var rollout *vidrav1alpha1.RolloutStatus
	if status.Bundles, rollout = d.Deliver(ctx, []fanout.Item{item}, targets, previousBundles(status)); rollout != nil {
		status.Rollout = rollout
	}

	// Remove what no longer has a destination.
	pruneErr := d.Prune(ctx)
	if srcErr != nil {
		return r.fail(obj, srcErr, min(interval, max(d.Requeue(), time.Second)))
	}
	return r.summarize(obj, d, want.revision, pruneErr, interval)
}

// wanted is the bundle a sync delivers: its digest and MD5 in the content store, and the
// revision it was built from.
type wanted struct {
	digest, checksum, revision string
}

// fetch asks the source for the revision the sync names and returns its bundle, fetched
// only when new, recording it in status.source.
func (r *Reconciler) fetch(ctx context.Context, obj Object) (wanted, error) {
	rev, err := r.Source.Resolve(ctx, obj)
	if err != nil {
		return wanted{}, err
	}
	status := obj.SourceStatus()
	now := metav1.NewTime(r.now())
	status.LastSyncTime = &now
	digest, checksum, fetched, err := r.bundle(ctx, obj, rev)
	if err != nil {
		return wanted{}, err
	}
	if fetched || status.Source == nil || status.Source.Key != rev.Key {
		status.Source = &vidrav1alpha1.SourceStatus{FetchedAt: &now}
	}
	status.Source.Revision, status.Source.Digest, status.Source.Key = rev.Name, digest, rev.Key
	return wanted{digest: digest, checksum: checksum, revision: rev.Name}, nil
}

// delivered is the bundle the sync fetched last, when it is still stored.
func (r *Reconciler) delivered(ctx context.Context, obj Object) (wanted, bool) {
	src := obj.SourceStatus().Source
	if src == nil || src.Digest == "" {
		return wanted{}, false
	}
	info, err := r.Content.Stat(ctx, src.Digest)
	if err != nil {
		return wanted{}, false
	}
	return wanted{digest: src.Digest, checksum: info.MD5, revision: src.Revision}, true
}

// bundle returns the digest and MD5 of rev's bundle in the content store, fetching and
// building it only when no earlier reconcile of any sync did (fetched says it did now).
func (r *Reconciler) bundle(ctx context.Context, obj Object, rev Revision) (digest, checksum string, fetched bool, err error) {
	known := ""
	memo := rev.Key + "\x00" + rev.Credentials
	if src := obj.SourceStatus().Source; src != nil && src.Key == rev.Key {
		known = src.Digest
	} else if b, ok := r.builds().Get(memo); ok {
		if f, failed := b.(failedBuild); failed {
			if f.until.IsZero() || r.now().Before(f.until) {
				return "", "", false, f.err
			}
			r.builds().Remove(memo)
		} else {
			known = b.(string)
		}
	}
	if known != "" {
		info, err := r.Content.Stat(ctx, known)
		if err == nil {
			return known, info.MD5, false, nil
		}
		if !errors.Is(err, content.ErrUnavailable) {
			return "", "", false, &Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("read bundle %s: %w", known, err)}
		}
		// Collected or damaged since: fetched again.
	}
	data, err := r.Source.Bundle(ctx, obj, rev)
	r.Metrics.observeFetch(r.Kind.Kind, err)
	if err == nil {
		if _, decodeErr := manifest.Decode(data); decodeErr != nil {
			err = &Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("%s: the bundle is not Kubernetes manifests: %w", rev.Name, decodeErr)}
		}
	}
	if err != nil {
		if f, ok := r.remembered(err); ok {
			r.builds().Add(memo, f)
		}
		return "", "", false, err
	}
	if digest, err = r.Content.Put(ctx, data); err != nil {
		return "", "", false, &Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("store bundle of %s: %w", rev.Name, err)}
	}
	r.builds().Add(memo, digest)
	return digest, content.MD5(data), true, nil
}

// failedBuild is a revision that could not be built, remembered so that it is not
// fetched again to fail the same way: until a time, or for good (zero).
type failedBuild struct {
	err   error
	until time.Time
}

// refNotFoundFor is how long a commit a checkout did not find is not looked for again: it
// may be pushed later.
const refNotFoundFor = 10 * time.Minute

// remembered says how long a failure to build a revision stands: for good when it is the
// revision's own (the same revision and path build the same way), for a while when the
// commit named was not found or the failure says how long, not at all when it may be the
// network's, a Secret's or the machine's (Transient).
func (r *Reconciler) remembered(err error) (failedBuild, bool) {
	var f *Failure
	switch {
	case !errors.As(err, &f), f.Transient:
		return failedBuild{}, false
	case f.RetryAfter > 0:
		return failedBuild{err: err, until: r.now().Add(f.RetryAfter)}, true
	case f.Reason == vidrav1alpha1.ReasonBuildFailed, f.Reason == vidrav1alpha1.ReasonLimitExceeded:
		return failedBuild{err: err}, true
	case f.Reason == vidrav1alpha1.ReasonRefNotFound:
		return failedBuild{err: err, until: r.now().Add(refNotFoundFor)}, true
	}
	return failedBuild{}, false
}

// delivery finds what the sync made before, and where its bundles go.
func (r *Reconciler) delivery(ctx context.Context, obj Object) (*fanout.Delivery, []fanout.Target, error) {
	d, err := fanout.New(ctx, r.fanoutConfig(), r.fanoutSync(obj), storedItems{store: r.Content})
	var targets []fanout.Target
	if err == nil {
		targets, err = d.Destinations(ctx)
	}
	if err != nil {
		markFailed(obj, vidrav1alpha1.ReasonVidraResourceFailed, err.Error())
		return nil, nil, err
	}
	return d, targets, nil
}

// stallTooLarge stalls the sync, delivering and removing nothing, when its status could
// not hold its items' (fanout.StatusTooLarge).
func (r *Reconciler) stallTooLarge(obj Object, d *fanout.Delivery, items []fanout.Item, targets []fanout.Target, interval time.Duration) (ctrl.Result, bool) {
	msg := d.StatusTooLarge(items, targets)
	if msg == "" {
		return ctrl.Result{}, false
	}
	markStalled(obj, vidrav1alpha1.ReasonLimitExceeded, msg)
	r.warn(obj, vidrav1alpha1.ReasonLimitExceeded, msg)
	return ctrl.Result{RequeueAfter: interval}, true
}

// previousBundles are the bundles a sync's status lists, by ID.
func previousBundles(status *vidrav1alpha1.SourceSyncStatus) map[string]vidrav1alpha1.ArtifactStatus {
	previous := make(map[string]vidrav1alpha1.ArtifactStatus, len(status.Bundles))
	for _, st := range status.Bundles {
		previous[st.ID] = st
	}
	return previous
}

// fanoutConfig is what every sync's delivery shares.
func (r *Reconciler) fanoutConfig() fanout.Config {
	return fanout.Config{
		Hub:         r.Hub,
		HubReader:   r.HubReader,
		Content:     r.Content,
		InlineLimit: cmp.Or(r.InlineLimit, defaultInlineLimit),
		Events:      events.NewRecorder(r.Recorder, "Sync"),
		Transient:   isTransient,
		ObserveWave: r.Metrics.observeWave,
		Now:         r.now,
		Written:     r.resourcesWritten,
	}
}

// fanoutSync is the sync as its delivery sees it.
func (r *Reconciler) fanoutSync(obj Object) fanout.Sync {
	opts := obj.Options()
	dest := opts.Destination.Destination
	if r.Renderer != nil {
		dest.Namespace = r.Renderer.Namespace(obj)
	}
	return fanout.Sync{
		Object:     obj,
		SourceName: r.Kind.Kind + " " + obj.GetName() + "'s source",
		Noun:       "bundle",
		Destination: vidrav1alpha1.InfrahubSyncDestination{
			Destination: dest, ClusterSelector: opts.Destination.ClusterSelector,
		},
		Template: opts.Template,
	}
}

// fail marks a source that gave no bundle. What was delivered before stays delivered: a
// failed fetch never prunes. One unusable as written stalls; a transient error is
// retried with backoff; another is looked at again at the interval.
func (r *Reconciler) fail(obj Object, err error, interval time.Duration) (ctrl.Result, error) {
	var f *Failure
	if !errors.As(err, &f) {
		f = &Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: err}
	}
	msg := err.Error() + "; what was delivered before stays as it is"
	if f.Stalled {
		markStalled(obj, f.Reason, msg)
	} else {
		markFailed(obj, f.Reason, msg)
	}
	r.warn(obj, f.Reason, msg)
	if f.Transient {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// summarize turns the delivery into conditions and the next requeue.
func (r *Reconciler) summarize(obj Object, d *fanout.Delivery, revision string, pruneErr error, interval time.Duration) (ctrl.Result, error) {
	if d.Requeue() > 0 && d.Requeue() < interval {
		interval = d.Requeue()
	}
	switch {
	case d.Stalled() != "":
		markStalled(obj, vidrav1alpha1.ReasonRolloutFailed, d.Stalled())
		r.warn(obj, vidrav1alpha1.ReasonRolloutFailed, d.Stalled())
		return ctrl.Result{RequeueAfter: interval}, nil
	case pruneErr != nil:
		markFailed(obj, vidrav1alpha1.ReasonVidraResourceFailed, pruneErr.Error())
		r.warn(obj, vidrav1alpha1.ReasonVidraResourceFailed, pruneErr.Error())
		return ctrl.Result{}, pruneErr
	case len(d.Problems()) > 0:
		msg := strings.Join(d.Problems(), "; ")
		markFailed(obj, vidrav1alpha1.ReasonArtifactFailed, msg)
		r.warn(obj, vidrav1alpha1.ReasonArtifactFailed, msg)
		if d.Transient() != nil {
			return ctrl.Result{}, d.Transient()
		}
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	markSucceeded(obj, fmt.Sprintf("delivered %s as %d VidraResources", revision, d.Kept()))
	return ctrl.Result{RequeueAfter: interval}, nil
}

// isTransient reports whether an error writing to the hub may pass with a retry.
func isTransient(err error) bool {
	var f *Failure
	if errors.As(err, &f) {
		return f.Transient
	}
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded)
}
