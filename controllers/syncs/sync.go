package syncs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// pendingPoll is how soon bundles a source is still generating are looked at again.
const pendingPoll = 10 * time.Second

// sync reads what the sync's source holds and delivers it. When the source fails, what
// the sync delivered before is still delivered — a rollout's waves go on, clusters
// joining the selection get it — and the failure is what the sync reports.
func (r *Reconciler) sync(ctx context.Context, obj Object, spec Spec) (ctrl.Result, error) {
	interval := cmp.Or(spec.Interval, defaultInterval)
	markReconciling(obj)
	r.settled.Delete(obj.GetName())

	// Ask the source what the sync delivers now.
	read, readErr := r.Kind.Read(ctx, obj)
	if read == nil {
		return r.fail(obj, unchanged(readErr), interval)
	}
	defer read.Close()

	// Find what the sync made before, and where its bundles go.
	d, err := fanout.New(ctx, r.fanoutConfig(), spec.Delivery, read)
	if err != nil {
		markFailed(obj, vidrav1alpha1.ReasonVidraResourceFailed, err.Error())
		return ctrl.Result{}, err
	}
	if reason, msg := read.Withheld(d.Owned()); msg != "" {
		markFailed(obj, reason, msg)
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	targets, err := d.Destinations(ctx)
	if err != nil {
		markFailed(obj, vidrav1alpha1.ReasonVidraResourceFailed, err.Error())
		return ctrl.Result{}, err
	}

	// Deliver each bundle, at once or wave by wave, if the status can record them all.
	previous := previousBundles(obj)
	items := read.Items(ctx, d, targets, previous)
	if msg := d.StatusTooLarge(items, targets); msg != "" {
		markStalled(obj, vidrav1alpha1.ReasonLimitExceeded, msg)
		r.warn(obj, vidrav1alpha1.ReasonLimitExceeded, msg)
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	bundles, rollout := d.Deliver(ctx, items, targets, previous)

	// Remove what is no longer listed or no longer has a destination.
	pruneErr := d.Prune(ctx)
	delivered, kindErr := read.Record(bundles, rollout, previous)
	if readErr != nil {
		return r.fail(obj, unchanged(readErr), min(interval, max(d.Requeue(), time.Second)))
	}
	return r.summarize(obj, d, spec.Delivery.SourceName, delivered, kindErr, pruneErr, interval)
}

// previousBundles are the bundles a sync's status lists, by ID.
func previousBundles(obj Object) map[string]vidrav1alpha1.BundleStatus {
	previous := make(map[string]vidrav1alpha1.BundleStatus, len(obj.Bundles()))
	for _, st := range obj.Bundles() {
		previous[st.ID] = st
	}
	return previous
}

// fanoutConfig is what every sync's delivery shares.
func (r *Reconciler) fanoutConfig() fanout.Config {
	cfg := fanout.Config{
		Hub:         r.Hub,
		HubReader:   r.HubReader,
		Content:     r.Content,
		InlineLimit: cmp.Or(r.InlineLimit, DefaultInlineLimit),
		Events:      events.NewRecorder(r.Recorder, "Sync"),
		Transient:   r.isTransient,
		Now:         r.now,
		Written:     r.resourcesWritten,
	}
	if r.Metrics != nil {
		cfg.ObserveWave = r.Metrics.ObserveWave
	}
	return cfg
}

// unchanged says of a source's failure that it changed nothing delivered.
func unchanged(err error) error {
	kept := *asFailure(err)
	kept.Err = fmt.Errorf("%w; what was delivered before stays as it is", kept.Err)
	return &kept
}

// asFailure is err as a *Failure: one a source says nothing of may pass on its own.
func asFailure(err error) *Failure {
	var f *Failure
	if !errors.As(err, &f) {
		f = &Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: err}
	}
	return f
}

// fail marks what stopped a sync. One unusable as written stalls; a transient error is
// retried with backoff; another is looked at again at the interval.
func (r *Reconciler) fail(obj Object, err error, interval time.Duration) (ctrl.Result, error) {
	f := asFailure(err)
	if f.Stalled {
		markStalled(obj, f.Reason, err.Error())
	} else {
		markFailed(obj, f.Reason, err.Error())
	}
	r.warn(obj, f.Reason, err.Error())
	if f.Transient {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// summarize turns the delivery into conditions and the next requeue. Bundles that failed
// for a reason that may pass (a source unreachable, a write conflict) are retried with
// backoff; others at the next interval.
func (r *Reconciler) summarize(obj Object, d *fanout.Delivery, source, delivered string, kindErr, pruneErr error, interval time.Duration) (ctrl.Result, error) {
	if d.Requeue() > 0 && d.Requeue() < interval {
		interval = d.Requeue()
	}
	switch {
	case d.Stalled() != "":
		markStalled(obj, vidrav1alpha1.ReasonRolloutFailed, d.Stalled())
		r.warn(obj, vidrav1alpha1.ReasonRolloutFailed, d.Stalled())
		return ctrl.Result{RequeueAfter: interval}, nil
	case kindErr != nil:
		return r.fail(obj, kindErr, interval)
	case pruneErr != nil:
		markFailed(obj, vidrav1alpha1.ReasonVidraResourceFailed, pruneErr.Error())
		r.warn(obj, vidrav1alpha1.ReasonVidraResourceFailed, pruneErr.Error())
		return ctrl.Result{}, pruneErr
	case len(d.Problems()) > 0:
		msg := strings.Join(d.Problems(), "; ")
		markFailed(obj, vidrav1alpha1.ReasonBundleFailed, msg)
		r.warn(obj, vidrav1alpha1.ReasonBundleFailed, msg)
		if d.Transient() != nil {
			return ctrl.Result{}, d.Transient()
		}
		return ctrl.Result{RequeueAfter: interval}, nil
	case len(d.Pending()) > 0:
		markPending(obj, "waiting for "+source+" to generate: "+strings.Join(d.Pending(), "; "))
		return ctrl.Result{RequeueAfter: min(interval, pendingPoll)}, nil
	}
	pass := settledPass{generation: obj.GetGeneration(), delivered: "delivered " + delivered + " as " + Counted(d.Kept(), "VidraResource")}
	r.settled.Store(obj.GetName(), pass)
	r.markDelivered(obj, pass.delivered, d.Readiness(obj.Bundles()))
	return ctrl.Result{RequeueAfter: interval}, nil
}

// Counted is n of noun as people write it: "1 artifact", "3 artifacts".
func Counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// isTransient reports whether an error may pass with a retry: a conflict or a timeout
// writing to the hub, a source's failure that says so, or what the kind knows of its own.
func (r *Reconciler) isTransient(err error) bool {
	var f *Failure
	if errors.As(err, &f) {
		return f.Transient
	}
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) ||
		r.Kind.Transient(err)
}
