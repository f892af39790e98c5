// Package syncs reconciles the syncs of every kind with one skeleton: it reads a sync,
// takes its share of the workers, checks that the hub's admission policies are in force,
// asks the kind's source what the sync delivers now, and delivers it through the fan-out
// (package fanout) — one VidraResource per bundle and destination cluster, at once or
// wave by wave — before writing its status once. A kind brings only what it alone knows
// (Kind): how its spec and status read and how its source is read.
package syncs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sevents "k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/celhealth"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
	"github.com/vidra-operator/vidra/internal/runtime/events"
	"github.com/vidra-operator/vidra/internal/runtime/fairshare"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
)

// Reconciler reconciles the syncs of one kind on the hub.
type Reconciler struct {
	// Kind is what the kind brings.
	Kind Kind
	// Hub reads syncs, VidraClusters and VidraResources from the cache and writes
	// VidraResources and status; HubReader reads past the cache.
	Hub       client.Client
	HubReader client.Reader
	// Content stores bundles larger than InlineLimit, which a VidraResource then names,
	// and every revision of a progressive rollout.
	Content *content.Store
	// InlineLimit is the largest bundle a VidraResource holds inline (DefaultInlineLimit
	// when 0).
	InlineLimit int
	// Recorder records Events on the syncs.
	Recorder k8sevents.EventRecorder
	// Metrics, when set, count syncs and waves.
	Metrics Metrics
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Guards, when set, say whether the hub's admission policies are in force; while one
	// is missing, no sync is delivered. Nil: none are required.
	Guards *admissionguard.Checker
	// PerSourceSyncs bounds the syncs of one server (scheme, host and port) that run at
	// once, of the kind's workers, so that a slow or trickling one leaves the other
	// workers to the rest (0: no bound).
	PerSourceSyncs int
	// Previews, when set, previews the refs of the kind's syncs that ask for it, with
	// workers of its own.
	Previews *Previews
	// PerRequesterSyncs bounds the syncs of one requester (who last wrote their spec)
	// that run at once, of the kind's workers (0: no bound).
	PerRequesterSyncs int

	// share counts the workers each source's server, and each requester, holds.
	share fairshare.SyncShare
	// written holds, per sync, the resourceVersion of this process's last status write:
	// a rollout decides from its status, which a lagging cache must not roll back.
	written fanout.StatusWrites
	// resourcesWritten is what the kind's deliveries last wrote to each VidraResource,
	// so that the controller is woken by others' changes only (set up with it).
	resourcesWritten *fanout.Written
	// traced holds, per sync, the last trace context taken from its annotations, so that
	// only the reconcile a push or webhook asked for joins that request's trace.
	traced sync.Map
	// settled holds, per sync, its last full pass when that delivered all it lists
	// (settledPass): a change of a VidraResource's health then recomputes the sync's
	// readiness without reading its source.
	settled sync.Map
	// healthExprs compiles the syncs' spec.healthCheckExprs, each expression once.
	healthExprs celhealth.Compiler
	// failing holds, per sync, the clusters where it failed at its last look, each with
	// the reason (recordFailures).
	failing sync.Map
	// inFlight counts the syncs being reconciled, which previews yield to.
	inFlight atomic.Int32
}

// DefaultInlineLimit is the largest bundle a VidraResource holds inline when InlineLimit
// is 0: well under the API server's object limit, with room for its status.
const DefaultInlineLimit = 256 << 10

// defaultInterval applies when spec.interval is unset (the API server defaults it).
const defaultInterval = time.Minute

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile narrates one sync of any kind.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	// Get the sync.
	kind := r.Kind.SyncKind()
	healthWake := req.Namespace == fanout.HealthWake
	req.Namespace = ""
	obj, err := fanout.Read(ctx, &r.written, r.Hub, r.HubReader, req.NamespacedName, func() Object { return kind.New().(Object) })
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Deleted: the garbage collector removes its VidraResources through their owner
	// references; each releases its objects as it goes.
	if !obj.GetDeletionTimestamp().IsZero() {
		r.Kind.Forget(obj.GetName())
		return ctrl.Result{}, nil
	}

	// Its source's server, or its requester, holds its share of the workers already:
	// looked at again soon, without holding one meanwhile.
	release, ok := r.slotFor(obj)
	if !ok {
		return ctrl.Result{RequeueAfter: fairshare.Retry(fairshare.BusyRetry)}, nil
	}
	defer release()

	// One span per reconcile: a child of the push or webhook that asked for it, else a
	// new trace.
	ctx, span := r.startSpan(ctx, obj)
	defer func() { endSpan(span, obj, retErr) }()

	// Status is written once, at the end, whatever path is taken.
	before := obj.DeepCopyObject().(Object)
	defer func() {
		if err := r.patchStatus(ctx, before, obj); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	// Suspended: nothing is read, written or removed.
	if obj.Suspended() {
		markSuspended(obj)
		return ctrl.Result{}, nil
	}
	spec := r.Kind.Spec(obj)
	if reason, why, err := r.Guards.SyncRefusal(ctx, r.Hub, kind.Kind, obj, spec.Reach); err != nil || why != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		markStalled(obj, reason, why)
		r.warn(obj, reason, why)
		return ctrl.Result{RequeueAfter: admissionguard.Retry}, nil
	}

	if healthWake {
		return r.refresh(ctx, obj)
	}
	if stalled, err := r.stallCycle(ctx, obj); err != nil {
		return ctrl.Result{}, err
	} else if stalled || r.stallHealthChecks(obj) {
		return ctrl.Result{RequeueAfter: cmp.Or(spec.Interval, defaultInterval)}, nil
	}
	start := r.now()
	r.inFlight.Add(1)
	result, err = r.sync(ctx, obj, spec)
	r.inFlight.Add(-1)
	r.requestPreviews(obj)
	if r.Metrics != nil {
		r.Metrics.ObserveSync(r.now().Sub(start))
	}
	return result, err // controller-runtime logs it, with the sync's name
}

// forget drops what this process keeps for a sync that is gone.
func (r *Reconciler) forget(name string) {
	r.Kind.Forget(name)
	r.written.Forget(name)
	r.traced.Delete(name)
	r.settled.Delete(name)
	r.failing.Delete(name)
}

// slotFor takes one of the workers' slots of the server the sync's source names (an
// Infrahub, a Git host, a registry, a Helm repository), and one of its requester's, so
// that a server that answers slowly, or not at all until the source's timeout, and a
// tenant whose syncs point at several such servers, hold no more than their share of the
// kind's workers. A suspended sync reads nothing and takes none.
func (r *Reconciler) slotFor(obj Object) (release func(), ok bool) {
	if obj.Suspended() {
		return func() {}, true
	}
	return r.share.Take(obj.SourceURL(), r.PerSourceSyncs, obj.GetAnnotations()[vidrav1alpha1.RequestedByAnnotation], r.PerRequesterSyncs)
}

// startSpan starts the reconcile's span, as a child of the trace context a push or
// webhook left on the sync when this process has not joined it yet.
func (r *Reconciler) startSpan(ctx context.Context, obj Object) (context.Context, trace.Span) {
	ctx = tracing.JoinRequest(ctx, obj, vidrav1alpha1.RequestedAtAnnotation, obj.LastSynced(), &r.traced)
	return tracing.Tracer().Start(ctx, "sync.reconcile", trace.WithAttributes(
		attribute.String("vidra.kind", obj.SyncKind().Kind), attribute.String("vidra.sync", obj.GetName()),
		attribute.Int64("vidra.generation", obj.GetGeneration())))
}

// endSpan records what the reconcile delivered on its span, and ends it.
func endSpan(span trace.Span, obj Object, err error) {
	span.SetAttributes(attribute.Int("vidra.bundles", len(obj.Bundles())))
	if st := obj.RolloutStatus(); st != nil {
		span.SetAttributes(attribute.Int64("vidra.revision", st.Revision))
	}
	if src := obj.Fetched(); src != nil {
		span.SetAttributes(attribute.String("vidra.source.revision", src.Revision))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (r *Reconciler) patchStatus(ctx context.Context, before, obj Object) error {
	r.Kind.Mirror(obj)
	status, observed := r.Kind.Status(obj)
	*observed = obj.GetGeneration()
	if was, _ := r.Kind.Status(before); apiequality.Semantic.DeepEqual(was, status) {
		return nil
	}
	err := r.Hub.Status().Patch(ctx, obj, client.MergeFrom(before))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch status of %s %s: %w", obj.SyncKind().Kind, obj.GetName(), err)
	}
	r.written.Wrote(obj)
	r.recordReady(before, obj)
	return nil
}

// warn records a Warning Event on a sync.
func (r *Reconciler) warn(obj Object, reason, note string) {
	events.NewRecorder(r.Recorder, "Sync").Record(obj, nil, corev1.EventTypeWarning, reason, note)
}
