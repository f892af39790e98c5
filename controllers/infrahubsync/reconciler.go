// Package infrahubsync reconciles InfrahubSyncs: it lists the artifacts of one name in
// Infrahub, downloads those whose checksum changed, and keeps one VidraResource per
// artifact and destination cluster, removing those whose artifact or cluster is gone. It
// also receives Infrahub's signed webhooks, which ask for a sync at once.
package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sevents "k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// Reconciler reconciles InfrahubSyncs on the hub.
type Reconciler struct {
	// Hub reads InfrahubSyncs, VidraClusters and VidraResources from the cache and writes
	// VidraResources and status.
	Hub client.Client
	// HubReader reads Secrets, only in Namespace, without caching them.
	HubReader client.Reader
	// Namespace is the operator's: the only namespace Secrets are read from.
	Namespace string
	// HTTPTimeout bounds every request to Infrahub.
	HTTPTimeout time.Duration
	// Recorder records Events on InfrahubSyncs.
	Recorder k8sevents.EventRecorder
	// Metrics, when set, count requests, downloads and sync durations.
	Metrics *Metrics
	// Content stores artifacts larger than InlineLimit, which a VidraResource then names
	// (spec.content). Nil: every artifact is inline.
	Content *content.Store
	// InlineLimit is the largest artifact held inline in spec.manifest (DefaultInlineLimit
	// when 0).
	InlineLimit int
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	sourcesOnce sync.Once
	srcs        *sources
	// written holds, per InfrahubSync, the resourceVersion of this process's last status
	// write: a rollout decides from its status, which a lagging cache must not roll back.
	written sync.Map
	// traced holds, per InfrahubSync, the last trace context taken from its annotations,
	// so that only the reconcile a webhook asked for joins that webhook's trace.
	traced sync.Map
}

// DefaultInlineLimit is the largest artifact a VidraResource holds inline: well under the
// API server's object limit, with room for its status.
const DefaultInlineLimit = 256 << 10

func (r *Reconciler) inlineLimit() int {
	if r.InlineLimit > 0 {
		return r.InlineLimit
	}
	return DefaultInlineLimit
}

// defaultInterval applies when spec.interval is unset (the API server defaults it).
const defaultInterval = time.Minute

// pendingPoll is how soon artifacts Infrahub is still generating are looked at again.
const pendingPoll = 10 * time.Second

func (r *Reconciler) sources() *sources {
	r.sourcesOnce.Do(func() {
		r.srcs = &sources{reader: r.HubReader, namespace: r.Namespace, timeout: r.HTTPTimeout, observe: r.Metrics.observeRequest}
	})
	return r.srcs
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile narrates one sync of an InfrahubSync.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	// Get the InfrahubSync.
	ihs, err := r.read(ctx, req.NamespacedName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.sources().forget(req.Name)
			r.written.Delete(req.Name)
			r.traced.Delete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Deleted: the garbage collector removes its VidraResources through their owner
	// references; each releases its objects as it goes.
	if !ihs.DeletionTimestamp.IsZero() {
		r.sources().forget(ihs.Name)
		return ctrl.Result{}, nil
	}

	// One span per reconcile: a child of the webhook that asked for it, else a new trace.
	ctx, span := r.startSpan(ctx, ihs)
	defer func() {
		span.SetAttributes(attribute.Int("vidra.artifacts", len(ihs.Status.Artifacts)))
		if ihs.Status.Rollout != nil {
			span.SetAttributes(attribute.Int64("vidra.revision", ihs.Status.Rollout.Revision))
		}
		if retErr != nil {
			span.SetStatus(codes.Error, retErr.Error())
		}
		span.End()
	}()

	// Status is written once, at the end, whatever path is taken.
	before := ihs.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, ihs); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	// Suspended: nothing is listed, written or removed.
	if ihs.Spec.Suspend {
		markSuspended(ihs)
		return ctrl.Result{}, nil
	}

	start := r.now()
	result, err = r.sync(ctx, ihs)
	r.Metrics.observeSync(r.now().Sub(start))
	return result, err // controller-runtime logs it, with the InfrahubSync's name
}

// startSpan starts the reconcile's span, as a child of the trace context a webhook left on
// the InfrahubSync when this process has not joined it yet.
func (r *Reconciler) startSpan(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) (context.Context, trace.Span) {
	// Joined once, and only while the request is newer than the last listing: after a
	// restart, an old webhook's trace is not joined again. lastSyncTime keeps whole
	// seconds, so the request is compared at that precision: one made in the second of
	// the last listing is taken as listed (its sync gets a trace of its own) rather than
	// risk joining a trace already synced.
	parent := ihs.Annotations[tracing.TraceparentAnnotation]
	requested, err := time.Parse(time.RFC3339Nano, ihs.Annotations[vidrav1alpha1.RequestedAtAnnotation])
	pending := err == nil && (ihs.Status.LastSyncTime == nil || requested.Truncate(time.Second).After(ihs.Status.LastSyncTime.Time))
	if last, _ := r.traced.Load(ihs.Name); parent != "" && pending && last != parent {
		r.traced.Store(ihs.Name, parent)
		ctx = tracing.Extract(ctx, ihs)
	} else {
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{}) // a trace of its own
	}
	return tracing.Tracer().Start(ctx, "infrahubsync.reconcile", trace.WithAttributes(
		attribute.String("vidra.infrahubsync", ihs.Name), attribute.Int64("vidra.generation", ihs.Generation)))
}

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

	// List the artifacts. A failed listing changes nothing.
	listCtx, listSpan := tracing.Tracer().Start(ctx, "infrahub.list", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("infrahub.branch", snap.Branch)))
	artifacts, err := r.list(listCtx, c, snap, ihs)
	listSpan.SetAttributes(attribute.Int("infrahub.artifacts", len(artifacts)))
	if err != nil {
		listSpan.SetStatus(codes.Error, err.Error())
	}
	listSpan.End()
	if err != nil {
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
	now := metav1.NewTime(r.now())
	ihs.Status.LastSyncTime = &now

	// Find what the sync made before, and where its artifacts go.
	owned, err := r.ownedResources(ctx, ihs)
	if err != nil {
		markFailed(ihs, vidrav1alpha1.ReasonVidraResourceFailed, err.Error())
		return ctrl.Result{}, err
	}
	if len(artifacts) == 0 && !ihs.Spec.AllowEmpty {
		markEmpty(ihs, len(owned))
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	dests, err := r.destinations(ctx, ihs)
	if err != nil {
		markFailed(ihs, vidrav1alpha1.ReasonVidraResourceFailed, err.Error())
		return ctrl.Result{}, err
	}

	// Deliver each artifact.
	previous := map[string]vidrav1alpha1.ArtifactStatus{}
	for _, st := range ihs.Status.Artifacts {
		previous[st.ID] = st
	}
	d := delivery{r: r, client: c, snap: snap, ihs: ihs, owned: owned, keep: map[string]bool{}, stored: map[string]string{}}
	var statuses []vidrav1alpha1.ArtifactStatus
	if progressive(ihs) {
		statuses = d.rollout(ctx, artifacts, dests, previous)
	} else {
		rollout := revisionOf(ihs, artifacts)
		d.revision = strconv.FormatInt(rollout.Revision, 10)
		for _, a := range artifacts {
			statuses = append(statuses, d.deliver(ctx, a, dests, previous[a.ID]))
		}
		if len(d.problems) > 0 {
			// The phase stays Completed: a switch to Progressive must not inherit a failure.
			rollout.Message = fmt.Sprintf("revision %d: not delivered everywhere: %s", rollout.Revision, d.problems[0])
		}
		ihs.Status.Rollout = &rollout
		meta.RemoveStatusCondition(&ihs.Status.Conditions, vidrav1alpha1.ConditionRolledOut)
	}

	// Remove what is no longer listed or no longer has a destination.
	pruneErr := r.prune(ctx, ihs, owned, d.keep, artifacts, previous)

	setArtifacts(ihs, statuses)
	return r.summarize(ihs, d, pruneErr, interval)
}

// failSource marks a source that could not be used. One that is unusable as written
// waits for a change; another error is retried with backoff.
func (r *Reconciler) failSource(ihs *vidrav1alpha1.InfrahubSync, err error, interval time.Duration) (ctrl.Result, error) {
	var srcErr *sourceError
	if errors.As(err, &srcErr) {
		markStalled(ihs, vidrav1alpha1.ReasonSourceInvalid, err.Error())
		r.event(ihs, nil, corev1.EventTypeWarning, vidrav1alpha1.ReasonSourceInvalid, err.Error())
		// A Secret may be created or fixed without the InfrahubSync changing.
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	markFailed(ihs, vidrav1alpha1.ReasonSourceInvalid, err.Error())
	return ctrl.Result{}, err
}

func (r *Reconciler) list(ctx context.Context, c *infrahub.Client, snap infrahub.Snapshot, ihs *vidrav1alpha1.InfrahubSync) ([]infrahub.Artifact, error) {
	if q := ihs.Spec.Source.QueryName; q != "" {
		return c.ListArtifactsByQuery(ctx, snap, q, ihs.Spec.Source.ArtefactName)
	}
	return c.ListArtifacts(ctx, snap, ihs.Spec.Source.ArtefactName)
}

func branchOf(ihs *vidrav1alpha1.InfrahubSync) string {
	if b := ihs.Spec.Source.TargetBranch; b != "" {
		return b
	}
	return "main"
}

// ownedResources are the VidraResources this InfrahubSync made: labeled with its name
// and controlled by it. A VidraResource that only carries the label is not its own.
func (r *Reconciler) ownedResources(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) (map[string]*vidrav1alpha1.VidraResource, error) {
	var list vidrav1alpha1.VidraResourceList
	if err := r.Hub.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.InfrahubSyncLabel: ihs.Name}); err != nil {
		return nil, fmt.Errorf("list VidraResources of %s: %w", ihs.Name, err)
	}
	owned := map[string]*vidrav1alpha1.VidraResource{}
	for i := range list.Items {
		if vr := &list.Items[i]; metav1.IsControlledBy(vr, ihs) {
			owned[vr.Name] = vr
		}
	}
	return owned, nil
}

// prune deletes the owned VidraResources no artifact keeps, and records an Event per
// artifact that left the listing.
func (r *Reconciler) prune(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync, owned map[string]*vidrav1alpha1.VidraResource,
	keep map[string]bool, listed []infrahub.Artifact, previous map[string]vidrav1alpha1.ArtifactStatus) error {
	var errs []error
	names := make([]string, 0, len(owned))
	for name := range owned {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if keep[name] {
			continue
		}
		vr := owned[name]
		// The UID precondition makes sure only this sync's VidraResource is deleted, even
		// if the name was reused since the cache saw it.
		err := r.Hub.Delete(ctx, vr, client.Preconditions{UID: &vr.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete VidraResource %s: %w", name, err))
		}
	}
	isListed := map[string]bool{}
	for _, a := range listed {
		isListed[a.ID] = true
	}
	for id, st := range previous {
		if !isListed[id] {
			var related *vidrav1alpha1.VidraResource
			if len(st.VidraResources) > 0 {
				related = &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: st.VidraResources[0]}}
			}
			r.event(ihs, related, corev1.EventTypeNormal, vidrav1alpha1.EventArtifactRemoved,
				fmt.Sprintf("artifact %s (%s, target %s) is no longer in Infrahub: removed %s", st.Name, id, st.Target, strings.Join(st.VidraResources, ", ")))
		}
	}
	return errors.Join(errs...)
}

// summarize turns the deliveries into conditions and the next requeue. Artifacts that
// failed for a reason that may pass (Infrahub unreachable, a write conflict) are retried
// with backoff; others at the next interval.
func (r *Reconciler) summarize(ihs *vidrav1alpha1.InfrahubSync, d delivery, pruneErr error, interval time.Duration) (ctrl.Result, error) {
	if d.requeue > 0 && d.requeue < interval {
		interval = d.requeue
	}
	switch {
	case d.stalled != "":
		markStalled(ihs, vidrav1alpha1.ReasonRolloutFailed, d.stalled)
		r.event(ihs, nil, corev1.EventTypeWarning, vidrav1alpha1.ReasonRolloutFailed, d.stalled)
		return ctrl.Result{RequeueAfter: interval}, nil
	case pruneErr != nil:
		markFailed(ihs, vidrav1alpha1.ReasonVidraResourceFailed, pruneErr.Error())
		return ctrl.Result{}, pruneErr
	case len(d.problems) > 0:
		msg := strings.Join(d.problems, "; ")
		markFailed(ihs, vidrav1alpha1.ReasonArtifactFailed, msg)
		r.event(ihs, nil, corev1.EventTypeWarning, vidrav1alpha1.ReasonArtifactFailed, msg)
		if d.transient != nil {
			return ctrl.Result{}, d.transient
		}
		return ctrl.Result{RequeueAfter: interval}, nil
	case len(d.pending) > 0:
		markPending(ihs, "waiting for Infrahub to generate: "+strings.Join(d.pending, "; "))
		return ctrl.Result{RequeueAfter: min(interval, pendingPoll)}, nil
	}
	markSucceeded(ihs, fmt.Sprintf("delivered %d artifacts as %d VidraResources", len(ihs.Status.Artifacts), len(d.keep)))
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
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return true
	case apierrors.IsConflict(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err):
		return true
	}
	return false
}

// read returns the InfrahubSync from the cache, or from the API server when the cache
// does not yet show this process's last status write.
func (r *Reconciler) read(ctx context.Context, key client.ObjectKey) (*vidrav1alpha1.InfrahubSync, error) {
	ihs := &vidrav1alpha1.InfrahubSync{}
	if err := r.Hub.Get(ctx, key, ihs); err != nil {
		return nil, err
	}
	last, ok := r.written.Load(key.Name)
	if !ok {
		return ihs, nil
	}
	if last.(string) == ihs.ResourceVersion {
		r.written.Delete(key.Name) // the cache has caught up
		return ihs, nil
	}
	fresh := &vidrav1alpha1.InfrahubSync{}
	if err := r.HubReader.Get(ctx, key, fresh); err != nil {
		return nil, err
	}
	// Until the cache shows what the API server said, it is read from there.
	r.written.Store(key.Name, fresh.ResourceVersion)
	return fresh, nil
}

func (r *Reconciler) patchStatus(ctx context.Context, before, ihs *vidrav1alpha1.InfrahubSync) error {
	ihs.Status.ObservedGeneration = ihs.Generation
	if statusEqual(before.Status, ihs.Status) {
		return nil
	}
	err := r.Hub.Status().Patch(ctx, ihs, client.MergeFrom(before))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch status of InfrahubSync %s: %w", ihs.Name, err)
	}
	r.written.Store(ihs.Name, ihs.ResourceVersion)
	return nil
}

// event records an Event on an InfrahubSync, optionally related to one of its
// VidraResources.
func (r *Reconciler) event(ihs *vidrav1alpha1.InfrahubSync, related *vidrav1alpha1.VidraResource, eventType, reason, note string) {
	recorder := events.NewRecorder(r.Recorder, "Sync")
	if related == nil {
		recorder.Record(ihs, nil, eventType, reason, note) // not a typed nil
		return
	}
	recorder.Record(ihs, related, eventType, reason, note)
}
