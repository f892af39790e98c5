// Package vidraresource reconciles VidraResources: it applies one manifest bundle to one
// cluster and keeps it there, releases what leaves the bundle, repairs drift as the
// destination reports it, and shows all of it in the VidraResource's status.
package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sevents "k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/history"
	"github.com/vidra-operator/vidra/internal/inventory"
	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/ownership"
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
	// revisions holds, per VidraResource, the revision this process last recorded.
	revisions sync.Map
	// handovers counts, per destination label, the times this replica lost the cluster
	// to another (an *atomic.Int64): a memo taken before a loss is never trusted after it.
	handovers sync.Map
}

func (r *Reconciler) book() *conflictBook {
	r.conflictsOnce.Do(func() { r.conflicts = newConflictBook() })
	return r.conflicts
}

// Reconcile narrates the life of one VidraResource.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	if r.Metrics != nil {
		defer prometheus.NewTimer(r.Metrics.duration).ObserveDuration()
	}

	// Get the VidraResource.
	vr, err := r.read(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Another replica owns its cluster: leave it all to that one.
	if !r.owned(ctx, vr) {
		return ctrl.Result{}, nil
	}

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
	// A patch of the finalizers alone: an Update would write back the whole spec as Go
	// encodes it (a readyTimeout of "10m" as "10m0s"), changing its generation.
	unfinalized := vr.DeepCopy()
	if controllerutil.AddFinalizer(vr, vidrav1alpha1.VidraResourceFinalizer) {
		if err := r.Hub.Patch(ctx, vr, client.MergeFromWithOptions(unfinalized, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
		r.wrote(vr)
		before = vr.DeepCopy()
	}

	// Suspended: nothing is applied or pruned.
	if vr.Spec.Suspend {
		markSuspended(vr)
		return ctrl.Result{}, nil
	}

	result, err = r.reconcileNormal(ctx, vr)
	// Content waiting for this VidraResource is previewed, whatever became of its own.
	r.previewPending(ctx, vr)
	return result, err // controller-runtime logs it, with the VidraResource's name
}

// reconcileNormal applies the bundle and releases what left it.
func (r *Reconciler) reconcileNormal(ctx context.Context, vr *vidrav1alpha1.VidraResource) (ctrl.Result, error) {
	previousResult := history.CurrentResult(vr)
	markReconciling(vr)
	markPinned(vr)

	// Read the bundle; stored content is verified whole before anything is applied.
	data, err := r.bundle(ctx, vr)
	switch {
	case errors.Is(err, content.ErrUnavailable):
		markStalled(vr, vidrav1alpha1.ReasonContentUnavailable, err.Error())
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonContentUnavailable, err.Error())
		return ctrl.Result{RequeueAfter: contentRetry}, nil // it may be stored yet
	case err != nil:
		markNotReady(vr, vidrav1alpha1.ReasonContentUnavailable, err.Error())
		return ctrl.Result{}, err
	}

	// Decode and validate the whole bundle before anything is applied.
	objects, err := manifest.Decode(data)
	if err != nil {
		markStalled(vr, vidrav1alpha1.ReasonInvalidManifest, "manifest: "+err.Error())
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonInvalidManifest, err.Error())
		return ctrl.Result{}, nil // terminal until the spec changes
	}

	// Find the destination cluster.
	dest, err := r.target(ctx, vr)
	if err != nil {
		markNotReady(vr, vidrav1alpha1.ReasonClusterNotFound, err.Error())
		if dest != nil {
			vr.Status.Cluster = destination.Label(dest.name)
		}
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	vr.Status.Cluster = destination.Label(dest.name)

	// The cluster's delivery policy, before anything reaches it.
	if denied := r.policyDenies(vr, dest, objects); denied != "" {
		markStalled(vr, vidrav1alpha1.ReasonPolicyDenied, denied)
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonPolicyDenied, denied)
		return ctrl.Result{}, nil // looked at again when the policy or the spec changes
	}
	declared := len(objects)
	objects, seen, err := r.withDestinationNamespace(ctx, dest, vr, objects)
	if err != nil {
		markNotReady(vr, vidrav1alpha1.ReasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	engine := r.engine(vr, dest)
	previous := inventory.FromEntries(vr.Status.ManagedResources)
	engine.Seen = seen
	shared := r.sharedApplyOf(dest.name)
	engine.Latches, engine.Memo = &shared.latches, &shared.memo
	engine.Current = func(ref inventory.Ref) (string, bool) { return r.Watches.ResourceVersion(ctx, dest, ref) }
	if len(objects) > declared {
		joinDestination(engine, vr.Spec.Destination.Namespace)
	}
	// A dry run previews the bundle and applies nothing.
	if vr.Spec.DryRun {
		return r.reconcileDryRun(ctx, vr, engine, objects, data)
	}

	// Health as last judged: an object left unchanged since keeps it.
	judged := statusOf(vr.Status.ManagedResources)

	// Record what is about to be owned before applying it, so a crash in between never
	// orphans an object: the new revision names it, or else the inventory in status does.
	// Objects a newer revision recorded before an earlier reconcile stopped are owned too.
	desired, mapErrs := refsOf(engine, objects)
	// Until what left the bundle is released, the inventory names it too. A bundle adding
	// nothing to what is recorded already fits, as it did before: a resync is not sized.
	if added := inventory.Difference(desired, previous); len(added) > 0 {
		if tooLarge := inventoryTooLarge(vr, desired, inventory.Union(previous, added)); tooLarge != "" {
			markStalled(vr, vidrav1alpha1.ReasonInventoryTooLarge, tooLarge)
			r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonInventoryTooLarge, tooLarge)
			return ctrl.Result{}, nil // terminal until the spec changes
		}
	}
	recorded, pending, err := r.recordRevision(ctx, vr, data, previousResult, desired)
	if errors.Is(err, errHistoryUnread) {
		markNotReady(vr, vidrav1alpha1.ReasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	if err != nil {
		// A history that was read but not written does not hold the delivery up: the
		// inventory is then recorded in status instead (one that cannot be read does,
		// above, since it may name objects an earlier reconcile applied).
		log := logr.FromContextOrDiscard(ctx)
		log.Error(err, "revision not recorded", "vidraresource", vr.Name)
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.EventHistoryFailed, "revision not recorded: "+err.Error())
	}
	previous = inventory.Union(previous, pending)
	// What is known spares reads: objects new to the inventory are created without one.
	engine.Applied = inventory.NewSet(previous).Has
	if !recorded {
		if err := r.recordInventory(ctx, vr, inventory.Union(previous, desired)); err != nil {
			return ctrl.Result{}, err
		}
	}

	// Apply, in stages.
	results, applyErr := engine.Apply(ctx, objects)
	r.rememberUsedAsItIs(dest, results)
	r.Watches.Use(dest, vr.Name, inventory.Kinds(desired), r.onEvents(vr))

	// Release what left the bundle (Namespaces and CRDs last).
	stale := inventory.Difference(previous, desired)
	var pruneErr error
	var released []apply.Result
	failedRelease := map[inventory.Ref]bool{}
	if len(stale) > 0 && applyErr == nil && len(mapErrs) == 0 {
		released, pruneErr = engine.Release(ctx, stale, prunes(vr))
		for _, res := range released {
			if res.Err != nil {
				failedRelease[res.Ref] = true
			}
		}
		r.eventResults(vr, released)
	} else {
		for _, ref := range stale {
			failedRelease[ref] = true
		}
	}
	// An existing object Vidra does not manage is not this VidraResource's to track.
	var kept []inventory.Ref
	for _, ref := range desired {
		if !slices.ContainsFunc(results, func(res apply.Result) bool {
			return (res.Action == apply.NotManaged || res.Action == apply.UsedAsItIs) && res.Ref.Key() == ref.Key()
		}) {
			kept = append(kept, ref)
		}
	}
	for _, ref := range stale {
		if failedRelease[ref] {
			kept = append(kept, ref) // still tracked, so a failed delete is retried
		}
	}
	setInventory(vr, kept)
	traceResults(ctx, results, released)
	r.eventResults(vr, results)
	r.Metrics.observeApply(vr.Status.Cluster, results)
	r.Metrics.setManaged(vr.Status.Cluster, vr.Name, len(kept))
	for _, holder := range r.book().record(vr.Name, r.HubID, results) {
		r.Watches.Requeue(holder)
	}

	changed := changedCluster(results) || changedCluster(released)
	result, err := r.summarize(vr, results, errors.Join(append(mapErrs, applyErr)...), pruneErr, changed)
	if err != nil || !meta.IsStatusConditionTrue(vr.Status.Conditions, vidrav1alpha1.ConditionReady) {
		return result, err
	}
	return r.reconcileHealth(ctx, vr, dest, kept, results, judged)
}

// changedCluster says whether any result changed an object on the cluster.
func changedCluster(results []apply.Result) bool {
	return slices.ContainsFunc(results, func(res apply.Result) bool { return res.Action.Changes() && res.Err == nil })
}

// rememberUsedAsItIs remembers the destination namespaces the apply found to exist and
// not be Vidra's, so that they are read, not created, next time.
func (r *Reconciler) rememberUsedAsItIs(dest *target, results []apply.Result) {
	for _, res := range results {
		if res.Action == apply.UsedAsItIs {
			r.sharedApplyOf(dest.name).setUnmanaged(res.Ref.Name)
		}
	}
}

// contentRetry is how soon a VidraResource whose stored content cannot be read looks again.
const contentRetry = 10 * time.Second

// bundle is the VidraResource's manifest: inline, or read from the content store.
func (r *Reconciler) bundle(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]byte, error) {
	return r.contentOf(ctx, "spec.content", vr.Spec.Manifest, vr.Spec.Content)
}

// contentOf is a bundle given inline (manifest) or by reference to the content store, as
// field gives it.
func (r *Reconciler) contentOf(ctx context.Context, field, manifest string, ref *vidrav1alpha1.ContentReference) ([]byte, error) {
	if ref == nil {
		return []byte(manifest), nil
	}
	if r.Content == nil {
		return nil, fmt.Errorf("%s names %s, and this operator has no content store: %w", field, ref.Digest, content.ErrUnavailable)
	}
	data, err := r.Content.Get(ctx, ref.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return data, nil
}

// joinDestination makes the engine join the destination namespace that
// withDestinationNamespace added to the bundle: its owners declare none of its fields.
func joinDestination(engine *apply.Engine, ns string) {
	engine.JoinOnly = func(ref inventory.Ref) bool {
		return ref.GVK.Group == "" && ref.GVK.Kind == "Namespace" && ref.Name == ns
	}
}

// onEvents says whether the VidraResource's drift is repaired as it happens, rather than at
// the next resync.
func (r *Reconciler) onEvents(vr *vidrav1alpha1.VidraResource) bool {
	return r.ReconcileOnEvents || vr.Spec.Destination.ReconcileOnEvents || vr.Spec.ReconcileOnEvents
}

// listedObjects is how many objects a condition names; the rest are counted. Each one's
// state is in status.managedResources.
const listedObjects = 10

// firstFew names the first listedObjects of items and counts the rest: a condition's
// message may hold 32 KiB, and a bundle may wait for thousands of objects.
func firstFew(items []string) string {
	if len(items) <= listedObjects {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more (status.managedResources lists each)", strings.Join(items[:listedObjects], "; "), len(items)-listedObjects)
}

// reconcileHealth keeps Ready false until every object is Current by kstatus. Status
// changes do not trigger the drift watches, so progress is polled. Objects the apply
// just returned are judged as returned, not read again.
func (r *Reconciler) reconcileHealth(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target, refs []inventory.Ref, applied []apply.Result, judged map[string]vidrav1alpha1.ManagedResource) (ctrl.Result, error) {
	inProgress, failed, err := health(ctx, withApplied(dest.client, applied), vr, refs, currentUnchanged(applied, judged))
	switch {
	case err != nil:
		markNotReady(vr, vidrav1alpha1.ReasonProgressing, err.Error())
		return ctrl.Result{}, err
	case len(failed) > 0:
		markNotReady(vr, vidrav1alpha1.ReasonHealthCheckFailed, "failed: "+firstFew(failed))
		return ctrl.Result{RequeueAfter: healthPoll}, nil
	case len(inProgress) > 0:
		markNotReady(vr, vidrav1alpha1.ReasonProgressing, "applied; waiting for: "+firstFew(inProgress))
		setCondition(vr, vidrav1alpha1.ConditionReconciling, metav1.ConditionTrue, vidrav1alpha1.ReasonProgressing, "waiting for objects to become ready")
		vr.Status.DeployState = vidrav1alpha1.StateRunning
		return ctrl.Result{RequeueAfter: healthPoll}, nil
	}
	return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
}

// conflictRetry is how soon a reconcile whose status write met a newer VidraResource runs
// again.
const conflictRetry = 50 * time.Millisecond

// healthPoll is how often objects still in progress are looked at again.
const healthPoll = 5 * time.Second

// summarize turns the apply and prune results into the status and the next requeue.
func (r *Reconciler) summarize(vr *vidrav1alpha1.VidraResource, results []apply.Result, applyErr, pruneErr error, changed bool) (ctrl.Result, error) {
	var conflicts []string
	for _, res := range results {
		switch res.Action {
		case apply.Conflicted:
			var fields []string
			for _, c := range res.Conflicts {
				fields = append(fields, fmt.Sprintf("%s (held by %s)", c.Field, strings.TrimPrefix(c.Manager, apply.FieldManagerPrefix)))
			}
			conflicts = append(conflicts, fmt.Sprintf("%s: %s", res.Ref, strings.Join(fields, ", ")))
		case apply.NotManaged:
			conflicts = append(conflicts, res.Err.Error())
		}
	}
	markConflict(vr, strings.Join(conflicts, "; "), r.book().heldAgainst(vr.Name))
	switch {
	case len(conflicts) > 0:
		markNotReady(vr, vidrav1alpha1.ReasonConflict, "conflicts with other owners: "+strings.Join(conflicts, "; "))
		return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
	case errors.Is(applyErr, apply.ErrStalled):
		// Retrying cannot help until the bundle changes; the resync looks again in case
		// what refused it (another CRD holding its names) went away.
		markStalled(vr, vidrav1alpha1.ReasonApplyFailed, applyErr.Error())
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonApplyFailed, applyErr.Error())
		return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
	case applyErr != nil:
		markNotReady(vr, vidrav1alpha1.ReasonApplyFailed, applyErr.Error())
		return ctrl.Result{}, applyErr
	case pruneErr != nil:
		markNotReady(vr, vidrav1alpha1.ReasonPruneFailed, pruneErr.Error())
		return ctrl.Result{}, pruneErr
	}
	markReady(vr, fmt.Sprintf("applied %d objects", len(vr.Status.ManagedResources)), changed)
	return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
}

// reconcileDelete releases every object, then removes the finalizer. An engaged but
// unreachable cluster holds the deletion; an un-enrolled one does not, and what was left
// on it is listed in a Warning Event.
func (r *Reconciler) reconcileDelete(ctx context.Context, vr *vidrav1alpha1.VidraResource) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(vr, vidrav1alpha1.VidraResourceFinalizer) {
		return ctrl.Result{}, nil
	}
	refs := inventory.FromEntries(vr.Status.ManagedResources)
	if r.History != nil {
		// Objects a revision recorded before a reconcile stopped without its status.
		pending, err := r.History.Pending(ctx, vr)
		if err != nil {
			markNotReady(vr, vidrav1alpha1.ReasonDeleting, err.Error())
			return ctrl.Result{}, err
		}
		refs = inventory.Union(refs, inventory.FromEntries(pending))
	}
	dest, err := r.target(ctx, vr)
	switch {
	case errors.Is(err, errClusterNotEngaged) && !r.clusterEnrolled(ctx, dest):
		if len(refs) > 0 {
			r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonDeleting,
				fmt.Sprintf("cluster %q is no longer enrolled; left on it: %s", dest.name, inventory.Join(refs)))
		}
	case err != nil && len(refs) == 0:
		// Nothing was ever applied (the destination never resolved): nothing to release.
	case err != nil:
		markNotReady(vr, vidrav1alpha1.ReasonDeleting, "waiting for the destination to release objects: "+err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	default:
		released, err := r.engine(vr, dest).Release(ctx, refs, prunes(vr))
		r.eventResults(vr, released)
		if err != nil {
			markNotReady(vr, vidrav1alpha1.ReasonDeleting, "releasing objects: "+err.Error())
			return ctrl.Result{}, err
		}
		r.Watches.Release(dest.name, vr.Name)
	}
	if dest != nil {
		r.sharedApplyOf(dest.name).memo.Forget(ownership.ID(r.HubID, vr.Name))
	}
	for _, holder := range r.book().forget(vr.Name) {
		r.Watches.Requeue(holder)
	}
	r.Metrics.setManaged(vr.Status.Cluster, vr.Name, 0)
	if r.History != nil {
		if err := r.History.Forget(ctx, vr); err != nil {
			// Owned by the VidraResource, they go with it through the garbage collector.
			logr.FromContextOrDiscard(ctx).Error(err, "revisions not deleted", "vidraresource", vr.Name)
		}
	}
	finalized := vr.DeepCopy()
	controllerutil.RemoveFinalizer(vr, vidrav1alpha1.VidraResourceFinalizer)
	if err := r.Hub.Patch(ctx, vr, client.MergeFromWithOptions(finalized, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	r.written.Delete(vr.Name)
	r.revisions.Delete(vr.Name)
	return ctrl.Result{}, nil
}

// clusterEnrolled says whether a VidraCluster still shows the cluster.
func (r *Reconciler) clusterEnrolled(ctx context.Context, dest *target) bool {
	if dest == nil || dest.name == destination.LocalCluster {
		return dest != nil
	}
	err := r.Hub.Get(ctx, client.ObjectKey{Name: string(dest.name)}, &vidrav1alpha1.VidraCluster{})
	return err == nil
}

func (r *Reconciler) engine(vr *vidrav1alpha1.VidraResource, dest *target) *apply.Engine {
	return &apply.Engine{
		Client:           dest.client,
		Owner:            ownership.ID(r.HubID, vr.Name),
		Adopt:            vr.Spec.AdoptExisting == vidrav1alpha1.AdoptAlways,
		DefaultNamespace: vr.Spec.Destination.Namespace,
		Parallelism:      applyParallelism,
	}
}

// applyParallelism is how many objects of one kind a reconcile applies at once: enough
// for one large bundle to keep its member busy, while many small bundles share the member
// among the workers anyway (docs/scaling.md has the measurements).
const applyParallelism = 8

// recordInventory writes the inventory to status at once, ahead of the apply.
func (r *Reconciler) recordInventory(ctx context.Context, vr *vidrav1alpha1.VidraResource, refs []inventory.Ref) error {
	if slices.Equal(refs, inventory.FromEntries(vr.Status.ManagedResources)) {
		return nil
	}
	// Patch a copy: the response would overwrite the status being built in vr.
	// Optimistic: the inventory is written whole, so it must not be built on a stale read.
	recorded := vr.DeepCopy()
	setInventory(recorded, refs)
	if err := r.Hub.Status().Patch(ctx, recorded, client.MergeFromWithOptions(vr, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("record inventory: %w", err)
	}
	setInventory(vr, refs)
	vr.ResourceVersion = recorded.ResourceVersion // our own write: the status patch builds on it
	r.wrote(vr)
	return nil
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

func (r *Reconciler) event(vr *vidrav1alpha1.VidraResource, eventType, reason, note string) {
	events.NewRecorder(r.Recorder, "Reconcile").Record(vr, nil, eventType, reason, note)
}

// eventResults records one Normal Event for what changed (created, configured, repaired,
// released...), naming the objects by outcome, and one Warning Event per kind of failure:
// a hub write per outcome rather than per object. (The recorder would fold Events of one
// reason into a series anyway, keeping the first object's note only.)
func (r *Reconciler) eventResults(vr *vidrav1alpha1.VidraResource, results []apply.Result) {
	type outcome struct{ eventType, reason string }
	var order []outcome
	notes := map[outcome][]string{}
	add := func(eventType, reason, note string) {
		o := outcome{eventType, reason}
		if _, ok := notes[o]; !ok {
			order = append(order, o)
		}
		notes[o] = append(notes[o], note)
	}
	var changed []apply.Action
	byAction := map[apply.Action][]string{}
	for _, res := range results {
		switch {
		case res.Action == apply.Failed || res.Action == apply.NotManaged:
			add(corev1.EventTypeWarning, string(res.Action), res.Err.Error())
		case res.Action == apply.Conflicted:
			add(corev1.EventTypeWarning, vidrav1alpha1.ReasonConflict, fmt.Sprintf("%s: fields held by another owner: %v", res.Ref, res.Conflicts))
		case res.Action.Changes():
			if _, ok := byAction[res.Action]; !ok {
				changed = append(changed, res.Action)
			}
			byAction[res.Action] = append(byAction[res.Action], res.Ref.String())
		}
	}
	if len(changed) > 0 {
		// Named after the first outcome (Created, Configured, Deleted...), as one change.
		var parts []string
		for _, a := range changed {
			parts = append(parts, strings.ToLower(string(a))+" "+strings.Join(byAction[a], ", "))
		}
		r.event(vr, corev1.EventTypeNormal, string(changed[0]), events.Join(parts))
	}
	for _, o := range order {
		r.event(vr, o.eventType, o.reason, events.Join(notes[o]))
	}
}

func prunes(vr *vidrav1alpha1.VidraResource) bool {
	return vr.Spec.Prune == nil || *vr.Spec.Prune
}

// withDestinationNamespace adds the destination namespace to the bundle when it is
// missing on the destination (or Vidra already manages it) and the bundle does not declare
// it, so it is created and owned like any other object. A namespace that exists and that
// Vidra does not manage is used as it is. The namespace it read is returned as seen, so
// the apply does not read it again.
func (r *Reconciler) withDestinationNamespace(ctx context.Context, dest *target, vr *vidrav1alpha1.VidraResource, objects []*unstructured.Unstructured) ([]*unstructured.Unstructured, []*metav1.PartialObjectMetadata, error) {
	ns := vr.Spec.Destination.Namespace
	if ns == "" {
		return objects, nil, nil
	}
	for _, o := range objects {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" && o.GetName() == ns {
			return objects, nil, nil
		}
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	ref := inventory.Ref{GVK: existing.GroupVersionKind(), Name: ns}
	n := &unstructured.Unstructured{}
	n.SetGroupVersionKind(ref.GVK)
	n.SetName(ns)
	// A namespace Vidra manages is in the drift watch's cache: no read. Seen stale, it
	// costs the apply a retry, never a wrong write (every write has a precondition).
	// Absent from a synced cache, it is missing or not Vidra's: the apply creates it, or
	// finds it is not Vidra's and uses it as it is (remembered, so it is read next time).
	// A service account may not be allowed to create it, nor an identity narrowed to
	// namespaces to watch them all: then it is read first.
	var err error
	cached, inCache := r.Watches.Cached(ctx, dest, ref)
	switch {
	case inCache:
		existing = cached
	case vr.Spec.ServiceAccountName == "" && !r.namespacesNarrowed(dest) && !r.sharedApplyOf(dest.name).isUnmanaged(ns) && r.Watches.Synced(ctx, dest, vr.Name, ref.GVK):
		return append([]*unstructured.Unstructured{n}, objects...), nil, nil
	default:
		err = dest.client.Get(ctx, client.ObjectKey{Name: ns}, existing)
	}
	var seen []*metav1.PartialObjectMetadata
	switch {
	case err == nil && !ownership.IsManaged(existing):
		return objects, nil, nil
	case err == nil:
		seen = append(seen, existing)
	case apierrors.IsForbidden(err):
		// An impersonated service account may not read namespaces: use the namespace as
		// it is, and let the apply say so if it is missing.
		return objects, nil, nil
	case !apierrors.IsNotFound(err):
		return nil, nil, fmt.Errorf("look up destination namespace %s: %w", ns, err)
	}
	return append([]*unstructured.Unstructured{n}, objects...), seen, nil
}

// appliedReader serves reads of the objects an apply just returned from them, and the
// others from the destination.
type appliedReader struct {
	client.Client
	applied map[string]*unstructured.Unstructured
}

func withApplied(c client.Client, results []apply.Result) client.Client {
	applied := map[string]*unstructured.Unstructured{}
	for _, res := range results {
		if res.Object != nil {
			applied[res.Ref.Key()] = res.Object
		}
	}
	return appliedReader{Client: c, applied: applied}
}

func (a appliedReader) Get(ctx context.Context, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return a.Client.Get(ctx, k, obj, opts...)
	}
	ref := inventory.Ref{GVK: u.GroupVersionKind(), Namespace: k.Namespace, Name: k.Name}
	got, ok := a.applied[ref.Key()]
	if !ok || got.GroupVersionKind() != u.GroupVersionKind() {
		return a.Client.Get(ctx, k, obj, opts...)
	}
	got.DeepCopyInto(u)
	return nil
}
