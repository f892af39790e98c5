// Package vidraresource reconciles VidraResources: it applies one manifest bundle to one
// cluster and keeps it there, releases what leaves the bundle, repairs drift as the
// destination reports it, and shows all of it in the VidraResource's status.
package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	k8sevents "k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/celhealth"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/runtime/fairshare"
)

// Reconciler reconciles VidraResources on the hub.
type Reconciler struct {
	// Hub reads and writes VidraResources.
	Hub client.Client
	// HubReader reads a VidraResource from the API server at the start of a reconcile when
	// the cache may not have seen this process's last write of it yet: its inventory must
	// include what the previous reconcile recorded.
	HubReader client.Reader
	// Manager finds destination clusters by name.
	Manager mcmanager.Manager
	// Resolver turns a destination into a cluster name.
	Resolver destination.Resolver
	// HubID makes owner IDs unique across hubs that share a member.
	HubID string
	// ReconcileOnEvents repairs drift on every VidraResource as it happens, whatever its
	// own switch says.
	ReconcileOnEvents bool
	// ResyncInterval reapplies every VidraResource at least this often.
	ResyncInterval time.Duration
	// RequestTimeout bounds every request to a destination.
	RequestTimeout time.Duration
	// Recorder records Events on VidraResources.
	Recorder k8sevents.EventRecorder
	// Watches repairs drift as soon as a destination reports it.
	Watches *DriftWatches
	// Metrics, when set, count applies, drift and managed objects.
	Metrics *Metrics
	// Content reads bundles that spec.content names. Nil: such bundles are refused.
	Content *content.Store
	// Shard, when several replicas split the fleet, says which clusters' VidraResources
	// this replica reconciles. Nil: all of them.
	Shard Shard

	conflictsOnce sync.Once
	conflicts     *conflictBook
	// shared holds a *sharedApply per cluster.
	shared sync.Map
	// written holds, per VidraResource, the resourceVersion of this process's last write.
	written sync.Map
	// History keeps the delivered revisions. Nil: none are kept.
	History *history.History
	// Policies gives enrolled clusters' delivery policies. Nil: no cluster has one.
	Policies PolicySource
	// HubGuard is what no bundle may change on the hub.
	HubGuard policy.HubGuard
	// Selector, when set, picks the VidraResources this controller looks after (a pull
	// cluster's agent: its copies of the hub's bundles, not the member's own).
	Selector labels.Selector
	// LocalPolicy is the local cluster's own delivery policy, besides HubGuard: a pull
	// cluster's agent enforces the policy it was enrolled with, whatever the hub sends.
	LocalPolicy policy.Policy
	// LocalServiceAccount is who bundles for the hub are applied as when they name no
	// ServiceAccount of their own; empty: such bundles are refused. The operator's own
	// identity never applies a bundle.
	LocalServiceAccount types.NamespacedName
	// Guards, when set, say whether the hub's admission policies that record and check
	// who asked are in force; nil: the operator runs without them (standalone, tests).
	Guards *admissionguard.Checker
	// deliverChecks holds, per VidraResource, the last answer to whether its requester
	// may deliver to its cluster.
	deliverChecks sync.Map
	// contentChecks holds, per contentCheckKey, the last answer to whether the
	// requester may deliver the stored content the field names.
	contentChecks sync.Map
	// revisions holds, per VidraResource, the revision this process last recorded.
	revisions sync.Map
	// PerClusterReconciles bounds the workers one destination cluster holds at once
	// (0: no bound).
	PerClusterReconciles int
	slots                fairshare.Slots[multicluster.ClusterName]
	// healthExprs compiles spec.healthCheckExprs, each expression once.
	healthExprs celhealth.Compiler
	// handovers counts, per destination label, the times this replica lost the cluster
	// to another (an *atomic.Int64): a memo taken before a loss is never trusted after it.
	handovers sync.Map
	// inFlight counts the reconciles running, which previews yield to (Delivering).
	inFlight atomic.Int32
}

// Delivering says whether a VidraResource is being reconciled now: a preview's dry-runs
// wait while one is, so that they never slow a delivery.
func (r *Reconciler) Delivering() bool { return r.inFlight.Load() > 0 }

func (r *Reconciler) book() *conflictBook {
	r.conflictsOnce.Do(func() { r.conflicts = newConflictBook() })
	return r.conflicts
}

// Reconcile narrates the life of one VidraResource.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	if r.Metrics != nil {
		defer prometheus.NewTimer(r.Metrics.duration).ObserveDuration()
	}

	// Get the VidraResource.
	vr, err := r.read(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Another replica owns its cluster, or it is not this controller's to look after.
	if !r.owned(ctx, vr) || (r.Selector != nil && !r.Selector.Matches(labels.Set(vr.Labels))) {
		return ctrl.Result{}, nil
	}
	// Its cluster holds its share of the workers already: looked at again when the
	// cluster gives one back, or soon in any case, without holding one meanwhile.
	release, ok := r.slotFor(vr)
	if !ok {
		return ctrl.Result{RequeueAfter: fairshare.Retry(fairshare.BusyRetry)}, nil
	}
	defer release()

	ctx, span := startSpan(ctx, vr)
	defer func() {
		span.SetAttributes(attribute.Int64("vidra.revision", vr.Status.Revision))
		if retErr != nil {
			span.SetStatus(codes.Error, retErr.Error())
		}
		span.End()
	}()

	// Status is written once, at the end, whatever path is taken.
	before := vr.DeepCopy()
	defer func() {
		err := r.patchStatus(ctx, before, vr)
		switch {
		case apierrors.IsConflict(err):
			// Another writer (the VM rollout) changed the status meanwhile: look again
			// rather than overwrite its conditions with the ones read before.
			result = ctrl.Result{RequeueAfter: conflictRetry}
		case err != nil:
			retErr = errors.Join(retErr, err)
		}
	}()

	// Deleted: release every object, then let it go.
	if !vr.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, vr)
	}

	// Hold deletion until the objects are released.
	if added, err := r.addFinalizer(ctx, vr); err != nil {
		return ctrl.Result{}, err
	} else if added {
		before = vr.DeepCopy()
	}
	return r.reconcileLive(ctx, vr)
}

// addFinalizer adds the finalizer that holds deletion until the objects are released,
// and says whether it did. A patch of the finalizers alone: an Update would write back
// the whole spec as Go encodes it (a readyTimeout of "10m" as "10m0s"), changing its
// generation.
func (r *Reconciler) addFinalizer(ctx context.Context, vr *vidrav1alpha1.VidraResource) (bool, error) {
	unfinalized := vr.DeepCopy()
	if !controllerutil.AddFinalizer(vr, vidrav1alpha1.VidraResourceFinalizer) {
		return false, nil
	}
	if err := r.Hub.Patch(ctx, vr, client.MergeFromWithOptions(unfinalized, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("add finalizer: %w", err)
	}
	r.wrote(vr)
	return true, nil
}

// reconcileLive delivers a VidraResource that is not being deleted: published to its
// pull cluster's agent, held while suspended, else applied.
func (r *Reconciler) reconcileLive(ctx context.Context, vr *vidrav1alpha1.VidraResource) (ctrl.Result, error) {
	// A pull cluster's agent delivers it: published to the agent, whose report is shown.
	if cluster, ok := r.pullCluster(ctx, vr); ok {
		return r.reconcilePull(ctx, vr, cluster)
	}
	if err := r.withdrawBundle(ctx, vr); err != nil {
		return ctrl.Result{}, err
	}

	// Suspended: nothing is applied or pruned.
	if vr.Spec.Suspend {
		markSuspended(vr)
		return ctrl.Result{}, nil
	}

	result, err := r.reconcileNormal(ctx, vr)
	// Content waiting for this VidraResource is previewed, whatever became of its own.
	r.previewPending(ctx, vr)
	return result, err // controller-runtime logs it, with the VidraResource's name
}

// reconcileNormal delivers the bundle, step by step: each step marks the status with what
// it found and may end the reconcile there.
func (r *Reconciler) reconcileNormal(ctx context.Context, vr *vidrav1alpha1.VidraResource) (ctrl.Result, error) {
	d := &delivery{vr: vr, previousResult: history.CurrentResult(vr)}
	markReconciling(vr)
	markPinned(vr)
	for _, step := range []func(context.Context, *delivery) *outcome{
		r.findDestination,   // the cluster it goes to
		r.checkRight,        // who may deliver there: nothing of the bundle is read before
		r.awaitDependencies, // a new spec waits for its syncs' dependencies on its cluster
		r.noteApplied,       // when a new spec is first applied: spec.timeout counts from it
		r.readBundle,        // the bundle, decoded whole before anything is applied
		r.checkPolicy,       // what the cluster takes
		r.prepareApply,      // the destination namespace and the apply engine
		r.checkPlacement,    // a destination namespace the apply creates is checked too
		r.previewOnly,       // a dry run previews the bundle and applies nothing
		r.sizeInventory,     // what it will own, which the hub must be able to record
		r.recordOwnership,   // recorded before it is applied: a crash never orphans an object
		r.applyBundle,       // server-side apply, in stages
		r.pruneStale,        // release what left the bundle
		r.reportResults,     // Events, metrics, conflicts and the Ready condition
		r.reportHealth,      // Ready only once every object is Current
	} {
		if o := step(ctx, d); o != nil {
			return o.result, o.err
		}
	}
	return r.resync(), nil
}

// delivery is one reconcile's delivery of a VidraResource's bundle: what each step found,
// for the steps after it.
type delivery struct {
	vr *vidrav1alpha1.VidraResource
	// previousResult is how the revision delivered until now stands, for the history.
	previousResult string
	// data is the bundle as given; objects are its objects, with the destination
	// namespace when the bundle must create it.
	data    []byte
	objects []*unstructured.Unstructured
	// addedNamespace: the destination namespace joined objects.
	addedNamespace bool
	dest           *target
	engine         *apply.Engine
	// judged is each object's health as last judged, by key: an object left unchanged
	// since keeps it.
	judged map[string]vidrav1alpha1.ManagedResource
	// previous is what the inventory named before (and what pending revisions recorded);
	// desired is what the bundle names; mapErrs are its objects whose kind did not map.
	previous, desired []inventory.Ref
	mapErrs           []error
	// results and released are what the apply and the release did, applyErr and
	// pruneErr how they failed; kept is the inventory after them.
	results, released []apply.Result
	applyErr          error
	pruneErr          error
	kept              []inventory.Ref
}

// outcome ends a reconcile with what Reconcile returns; a step returns nil to go on.
type outcome struct {
	result ctrl.Result
	err    error
}

// stop ends the reconcile with result and err.
func stop(result ctrl.Result, err error) *outcome {
	return &outcome{result: result, err: err}
}

func (r *Reconciler) patchStatus(ctx context.Context, before, vr *vidrav1alpha1.VidraResource) error {
	vr.Status.ObservedGeneration = vr.Generation
	if apiequalitySemantic(before.Status, vr.Status) {
		return nil
	}
	// Optimistic: a JSON merge patch replaces the conditions list whole, so it must not
	// be made from a stale read. vr's resourceVersion is that of this reconcile's own
	// last write (finalizer, inventory), so only someone else's write conflicts.
	base := before.DeepCopy()
	base.ResourceVersion = vr.ResourceVersion
	err := r.Hub.Status().Patch(ctx, vr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsNotFound(err):
		r.written.Delete(vr.Name)
		return nil
	case err == nil:
		r.wrote(vr)
	}
	return err
}

// read returns the VidraResource from the cache when the cache is at least as fresh as
// this process's last write of it, or when it is new; otherwise from the API server. Its
// inventory must include what the previous reconcile recorded, which a lagging cache may
// not. A new one (no finalizer yet, or no status yet: the chart's admission policy gives
// it the finalizer as it is created) is safe to read from the cache: it has no inventory
// to miss, every hub write made from the copy is optimistic, and the revisions that
// record objects are read from the API server. A copy a spec change behind is applied as
// any cached copy is, and the change is applied when its event comes.
func (r *Reconciler) read(ctx context.Context, key client.ObjectKey) (*vidrav1alpha1.VidraResource, error) {
	vr := &vidrav1alpha1.VidraResource{}
	if err := r.Hub.Get(ctx, key, vr); err == nil {
		last, wrote := r.written.Load(key.Name)
		if (wrote && last.(string) == vr.ResourceVersion) || (!wrote && isNew(vr)) {
			return vr, nil
		}
	}
	vr = &vidrav1alpha1.VidraResource{}
	return vr, r.HubReader.Get(ctx, key, vr)
}

// isNew says the VidraResource was never reconciled: no finalizer, or no status.
func isNew(vr *vidrav1alpha1.VidraResource) bool {
	if !vr.DeletionTimestamp.IsZero() {
		return false
	}
	s := vr.Status
	return len(vr.Finalizers) == 0 || (s.ObservedGeneration == 0 && len(s.Conditions) == 0 && len(s.ManagedResources) == 0 && s.Revision == 0)
}

// wrote records the resourceVersion this process's write left the VidraResource at.
func (r *Reconciler) wrote(vr *vidrav1alpha1.VidraResource) {
	r.written.Store(vr.Name, vr.ResourceVersion)
}

// conflictRetry is how soon a reconcile whose status write met a newer VidraResource runs
// again.
const conflictRetry = 50 * time.Millisecond
