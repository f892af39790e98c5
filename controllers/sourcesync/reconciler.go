// Package sourcesync reconciles the syncs whose source hands over one bundle per
// revision — GitSync and OCISync: it asks the source which revision the sync names,
// fetches and builds that revision only when it is new (once for every sync that reads
// it), stores the bundle in the content store, and delivers it through the fan-out every
// sync kind shares (package fanout): one VidraResource per destination cluster, at once or
// wave by wave, with previews, history and rollback. A kind brings only its Source.
package sourcesync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sevents "k8s.io/client-go/tools/events"
	"k8s.io/utils/lru"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/admissionguard"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/fairshare"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/policy"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// Reconciler reconciles the syncs of one kind on the hub.
type Reconciler struct {
	// Kind is the kind reconciled; New returns an empty object of it.
	Kind vidrav1alpha1.SyncKind
	New  func() Object
	// Source resolves and fetches what the kind's syncs name: one bundle for every
	// destination; or Renderer, which builds one for each.
	Source   Source
	Renderer Renderer
	// Hub reads syncs, VidraClusters and VidraResources from the cache and writes
	// VidraResources and status; HubReader reads past the cache.
	Hub       client.Client
	HubReader client.Reader
	// Content stores every bundle, which VidraResources and rollouts then name.
	Content *content.Store
	// InlineLimit is the largest bundle a VidraResource holds inline.
	InlineLimit int
	// Recorder records Events on the syncs.
	Recorder k8sevents.EventRecorder
	// Metrics, when set, count fetches, syncs and waves.
	Metrics *Metrics
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Guards, when set, say whether the hub's admission policies are in force; while one
	// is missing, no sync is delivered. Nil: none are required.
	Guards *admissionguard.Checker
	// PerSourceSyncs bounds the syncs of one server (scheme, host and port) that run at
	// once, of the kind's workers (0: no bound).
	PerSourceSyncs int
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
	// only the reconcile a push asked for joins that push's trace.
	traced sync.Map
	// built holds, for the revision keys met last, the digest of the bundle built, or the
	// failure no retry of the same revision can mend (a build error, a bound): syncs
	// reading the same revision and path build it once, and a bad revision is not
	// fetched again at every interval. Bounded, so that commits do not pile up.
	builtOnce sync.Once
	built     *lru.Cache
}

// defaultInterval applies when spec.interval is unset (the API server defaults it).
const defaultInterval = time.Minute

// builtKeys bounds the revision keys remembered: far more than the syncs that share one.
const builtKeys = 1024

func (r *Reconciler) builds() *lru.Cache {
	r.builtOnce.Do(func() { r.built = lru.New(builtKeys) })
	return r.built
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile narrates one sync of a GitSync or an OCISync.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	// Get the sync.
	obj, err := fanout.Read(ctx, &r.written, r.Hub, r.HubReader, req.NamespacedName, r.New)
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.Name)
			r.traced.Delete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Deleted: the garbage collector removes its VidraResources through their owner
	// references; each releases its objects as it goes.
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}

	// Its source's server holds its share of the workers already: looked at again soon,
	// without holding one meanwhile.
	release, ok := r.slotFor(obj)
	if !ok {
		return ctrl.Result{RequeueAfter: fairshare.Retry(fairshare.BusyRetry)}, nil
	}
	defer release()

	// One span per reconcile: a child of the push that asked for it, else a new trace.
	ctx = tracing.JoinRequest(ctx, obj, vidrav1alpha1.RequestedAtAnnotation, obj.SourceStatus().LastSyncTime, &r.traced)
	ctx, span := tracing.Tracer().Start(ctx, "sourcesync.reconcile", trace.WithAttributes(
		attribute.String("vidra.kind", r.Kind.Kind), attribute.String("vidra.sync", obj.GetName()),
		attribute.Int64("vidra.generation", obj.GetGeneration())))
	defer func() {
		if src := obj.SourceStatus().Source; src != nil {
			span.SetAttributes(attribute.String("vidra.source.revision", src.Revision))
		}
		if retErr != nil {
			span.SetStatus(codes.Error, retErr.Error())
		}
		span.End()
	}()

	// Status is written once, at the end, whatever path is taken.
	before := obj.DeepCopyObject().(Object)
	defer func() {
		if err := r.patchStatus(ctx, before, obj); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	// Suspended: nothing is fetched, written or removed.
	if obj.Options().Suspend {
		markSuspended(obj)
		return ctrl.Result{}, nil
	}
	opts := obj.Options()
	reach := policy.SyncReach(opts.Destination.Destination, opts.Destination.ClusterSelector != nil, opts.Template)
	if reason, why, err := r.Guards.SyncRefusal(ctx, r.Hub, r.Kind.Kind, obj, reach); err != nil || why != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		markStalled(obj, reason, why)
		r.warn(obj, reason, why)
		return ctrl.Result{RequeueAfter: admissionguard.Retry}, nil
	}

	start := r.now()
	result, err = r.sync(ctx, obj)
	r.Metrics.observeSync(r.Kind.Kind, r.now().Sub(start))
	return result, err // controller-runtime logs it, with the sync's name
}

func (r *Reconciler) patchStatus(ctx context.Context, before, obj Object) error {
	obj.SourceStatus().ObservedGeneration = obj.GetGeneration()
	if statusEqual(before.SourceStatus(), obj.SourceStatus()) {
		return nil
	}
	err := r.Hub.Status().Patch(ctx, obj, client.MergeFrom(before))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch status of %s %s: %w", r.Kind.Kind, obj.GetName(), err)
	}
	r.written.Wrote(obj)
	return nil
}

// warn records a Warning Event on a sync.
func (r *Reconciler) warn(obj Object, reason, note string) {
	events.NewRecorder(r.Recorder, "Sync").Record(obj, nil, corev1.EventTypeWarning, reason, note)
}
