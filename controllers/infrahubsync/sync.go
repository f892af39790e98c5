package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/credentials"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// sync lists the artifacts, delivers each to its destinations and removes what is gone.
func (r *Reconciler) sync(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) (ctrl.Result, error) {
	interval := defaultInterval
	if ihs.Spec.Interval != nil {
		interval = ihs.Spec.Interval.Duration
	}
	markReconciling(ihs)

	// Connect to Infrahub.
	c, err := r.sources().clientFor(ctx, ihs)
	if err != nil {
		return r.failSource(ihs, err, interval)
	}
	at, err := infrahub.At(ihs.Spec.Source.TargetDate, r.now())
	if err != nil {
		return r.failSource(ihs, &sourceError{msg: err.Error()}, interval)
	}
	snap := infrahub.Snapshot{Branch: branchOf(ihs), At: at}

	// Read Infrahub within the operator's bounds, so no Infrahub can take the memory
	// every sync shares.
	quota := infrahub.NewQuota(r.Limits, time.Now())
	defer quota.Close()

	// List the artifacts. A failed listing, or one over the bounds, changes nothing.
	listed, err := r.list(ctx, c, snap, ihs, quota)
	if err != nil {
		return r.failList(ihs, err, interval)
	}
	now := metav1.NewTime(r.now())
	ihs.Status.LastSyncTime = &now

	// Find what the sync made before, and where its artifacts go.
	d, err := fanout.New(ctx, r.fanoutConfig(), fanoutSync(ihs), artifacts{client: c, snap: snap, metrics: r.Metrics, quota: quota})
	if err != nil {
		markFailed(ihs, vidrav1alpha1.ReasonVidraResourceFailed, err.Error())
		return ctrl.Result{}, err
	}
	if len(listed) == 0 && !ihs.Spec.AllowEmpty {
		markEmpty(ihs, d.Owned())
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	targets, err := d.Destinations(ctx)
	if err != nil {
		markFailed(ihs, vidrav1alpha1.ReasonVidraResourceFailed, err.Error())
		return ctrl.Result{}, err
	}

	// Deliver each artifact, at once or wave by wave, if the status can record them all.
	items := itemsOf(listed)
	if msg := d.StatusTooLarge(items, targets); msg != "" {
		markStalled(ihs, vidrav1alpha1.ReasonLimitExceeded, msg)
		r.event(ihs, nil, corev1.EventTypeWarning, vidrav1alpha1.ReasonLimitExceeded, msg)
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	previous := map[string]vidrav1alpha1.ArtifactStatus{}
	for _, st := range ihs.Status.Artifacts {
		previous[st.ID] = st
	}
	statuses, rollout := d.Deliver(ctx, items, targets, previous)
	if rollout != nil {
		ihs.Status.Rollout = rollout
	}

	// Remove what is no longer listed or no longer has a destination.
	pruneErr := d.Prune(ctx)
	r.eventRemoved(ihs, listed, previous)

	setArtifacts(ihs, statuses)
	return r.summarize(ihs, d, quota.Exceeded(), pruneErr, interval)
}

// fanoutConfig is what every InfrahubSync's delivery shares.
func (r *Reconciler) fanoutConfig() fanout.Config {
	return fanout.Config{
		Hub:         r.Hub,
		HubReader:   r.HubReader,
		Content:     r.Content,
		InlineLimit: r.inlineLimit(),
		Events:      events.NewRecorder(r.Recorder, "Sync"),
		Transient:   isTransient,
		ObserveWave: r.Metrics.observeWave,
		Now:         r.now,
		Written:     r.resourcesWritten,
	}
}

// fanoutSync is the InfrahubSync as its delivery sees it.
func fanoutSync(ihs *vidrav1alpha1.InfrahubSync) fanout.Sync {
	return fanout.Sync{
		Object:      ihs,
		SourceName:  "Infrahub",
		Noun:        "artifact",
		Destination: ihs.Spec.Destination,
		Template:    ihs.Spec.Template,
	}
}

// failSource marks a source that could not be used. One that is unusable as written
// waits for a change; another error is retried with backoff.
func (r *Reconciler) failSource(ihs *vidrav1alpha1.InfrahubSync, err error, interval time.Duration) (ctrl.Result, error) {
	reason := ""
	var srcErr *sourceError
	var refusal *credentials.Refusal
	switch {
	case errors.As(err, &refusal):
		reason = refusal.Reason
	case errors.As(err, &srcErr):
		reason = vidrav1alpha1.ReasonSourceInvalid
	}
	if reason != "" {
		markStalled(ihs, reason, err.Error())
		r.event(ihs, nil, corev1.EventTypeWarning, reason, err.Error())
		// A Secret or a right may be created or fixed without the InfrahubSync changing.
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	markFailed(ihs, vidrav1alpha1.ReasonSourceInvalid, err.Error())
	return ctrl.Result{}, err
}

func (r *Reconciler) list(ctx context.Context, c *infrahub.Client, snap infrahub.Snapshot, ihs *vidrav1alpha1.InfrahubSync, quota *infrahub.Quota) ([]infrahub.Artifact, error) {
	ctx, span := tracing.Tracer().Start(ctx, "infrahub.list", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("infrahub.branch", snap.Branch)))
	defer span.End()
	var listed []infrahub.Artifact
	var err error
	if q := ihs.Spec.Source.QueryName; q != "" {
		listed, err = c.ListArtifactsByQuery(ctx, snap, q, ihs.Spec.Source.ArtefactName, quota)
	} else {
		listed, err = c.ListArtifacts(ctx, snap, ihs.Spec.Source.ArtefactName, quota)
	}
	span.SetAttributes(attribute.Int("infrahub.artifacts", len(listed)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return listed, err
}

// failList marks a listing that failed: refused credentials wait for the interval, as a
// retry cannot help until they change, and so does a listing over the operator's bounds,
// which stalls the sync; another error is retried with backoff.
func (r *Reconciler) failList(ihs *vidrav1alpha1.InfrahubSync, err error, interval time.Duration) (ctrl.Result, error) {
	if lim, ok := infrahub.AsLimitError(err); ok {
		r.stallOverLimit(ihs, lim, err.Error()+"; nothing delivered was changed or removed")
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	reason := vidrav1alpha1.ReasonListFailed
	if infrahub.IsAuthError(err) {
		reason = vidrav1alpha1.ReasonAuthenticationFailed
	}
	markFailed(ihs, reason, err.Error())
	r.event(ihs, nil, corev1.EventTypeWarning, reason, err.Error())
	if infrahub.IsAuthError(err) {
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	return ctrl.Result{}, err
}

func branchOf(ihs *vidrav1alpha1.InfrahubSync) string {
	if b := ihs.Spec.Source.TargetBranch; b != "" {
		return b
	}
	return "main"
}

// eventRemoved records an Event for each artifact that left the listing, the first
// fanout.MaxItemEvents of them one by one and the rest in one Event: a thousand artifacts
// gone at once (a branch merged, a site decommissioned) cost the hub a dozen writes.
func (r *Reconciler) eventRemoved(ihs *vidrav1alpha1.InfrahubSync, listed []infrahub.Artifact, previous map[string]vidrav1alpha1.ArtifactStatus) {
	isListed := map[string]bool{}
	for _, a := range listed {
		isListed[a.ID] = true
	}
	var folded []string
	recorded := 0
	for _, id := range slices.Sorted(maps.Keys(previous)) {
		st := previous[id]
		if isListed[id] {
			continue
		}
		if recorded == fanout.MaxItemEvents {
			folded = append(folded, fanout.ItemName(st.Name, st.Target))
			continue
		}
		recorded++
		var related *vidrav1alpha1.VidraResource
		if len(st.VidraResources) > 0 {
			related = &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: st.VidraResources[0]}}
		}
		removed := strings.Join(st.VidraResources, ", ")
		if n := int(st.VidraResourceCount); n > len(st.VidraResources) {
			removed = fmt.Sprintf("%d VidraResources (%s, …)", n, removed)
		}
		r.event(ihs, related, corev1.EventTypeNormal, vidrav1alpha1.EventArtifactRemoved,
			fmt.Sprintf("artifact %s (%s, target %s) is no longer in Infrahub: removed %s", st.Name, id, st.Target, removed))
	}
	if len(folded) > 0 {
		r.event(ihs, nil, corev1.EventTypeNormal, vidrav1alpha1.EventArtifactRemoved,
			fanout.SummingUp("artifact", "no longer in Infrahub, their VidraResources removed", folded))
	}
}

// summarize turns the deliveries into conditions and the next requeue. Artifacts that
// failed for a reason that may pass (Infrahub unreachable, a write conflict) are retried
// with backoff; others at the next interval.
//
// A sync that went over one of the operator's bounds while downloading is Stalled: what
// it could not download keeps what it delivered, and retrying sooner cannot help.
func (r *Reconciler) summarize(ihs *vidrav1alpha1.InfrahubSync, d *fanout.Delivery, over *infrahub.LimitError, pruneErr error, interval time.Duration) (ctrl.Result, error) {
	if d.Requeue() > 0 && d.Requeue() < interval {
		interval = d.Requeue()
	}
	switch {
	case d.Stalled() != "":
		markStalled(ihs, vidrav1alpha1.ReasonRolloutFailed, d.Stalled())
		r.event(ihs, nil, corev1.EventTypeWarning, vidrav1alpha1.ReasonRolloutFailed, d.Stalled())
		return ctrl.Result{RequeueAfter: interval}, nil
	case over != nil:
		r.stallOverLimit(ihs, over, over.Error()+"; the artifacts not downloaded keep what they delivered")
		return ctrl.Result{RequeueAfter: interval}, nil
	case pruneErr != nil:
		markFailed(ihs, vidrav1alpha1.ReasonVidraResourceFailed, pruneErr.Error())
		return ctrl.Result{}, pruneErr
	case len(d.Problems()) > 0:
		msg := strings.Join(d.Problems(), "; ")
		markFailed(ihs, vidrav1alpha1.ReasonArtifactFailed, msg)
		r.event(ihs, nil, corev1.EventTypeWarning, vidrav1alpha1.ReasonArtifactFailed, msg)
		if d.Transient() != nil {
			return ctrl.Result{}, d.Transient()
		}
		return ctrl.Result{RequeueAfter: interval}, nil
	case len(d.Pending()) > 0:
		markPending(ihs, "waiting for Infrahub to generate: "+strings.Join(d.Pending(), "; "))
		return ctrl.Result{RequeueAfter: min(interval, pendingPoll)}, nil
	}
	markSucceeded(ihs, fmt.Sprintf("delivered %d artifacts as %d VidraResources", len(ihs.Status.Artifacts), d.Kept()))
	return ctrl.Result{RequeueAfter: interval}, nil
}

// isTransient reports whether an error may pass on its own: the network, a timeout, an
// Infrahub server error, or a conflict writing to the hub.
func isTransient(err error) bool {
	var apiErr *infrahub.APIError
	var netErr net.Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr.Status >= http.StatusInternalServerError || apiErr.Status == http.StatusTooManyRequests
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded), errors.Is(err, infrahub.ErrStalled):
		return true
	case apierrors.IsConflict(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err):
		return true
	}
	return false
}
