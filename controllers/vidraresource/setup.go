package vidraresource

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/runtime/ctrlqueue"
)

// SetupWithManager registers the controller with the hub's manager: VidraResources (on a
// change of spec or a deletion), drift reported by destinations, and clusters being
// enrolled (which may resolve a waiting destination).
func (r *Reconciler) SetupWithManager(maxConcurrentReconciles int) error {
	local := r.Manager.GetLocalManager()
	if err := indexByCluster(context.Background(), local.GetFieldIndexer()); err != nil {
		return err
	}
	if err := indexByDependency(context.Background(), local.GetFieldIndexer()); err != nil {
		return err
	}
	specOrDeletion := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			!e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
	selected := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return r.Selector == nil || r.Selector.Matches(labels.Set(obj.GetLabels()))
	})
	b := ctrl.NewControllerManagedBy(local).
		Named("vidraresource").
		For(&vidrav1alpha1.VidraResource{}, builder.WithPredicates(specOrDeletion, selected)).
		WatchesRawSource(source.Channel(r.Watches.events, &handler.TypedEnqueueRequestForObject[*vidrav1alpha1.VidraResource]{})).
		// A dependency Ready on a cluster wakes what waits for it there at once.
		Watches(&vidrav1alpha1.VidraResource{}, handler.EnqueueRequestsFromMapFunc(r.dependentsOf),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(e event.UpdateEvent) bool {
					old, okOld := e.ObjectOld.(*vidrav1alpha1.VidraResource)
					cur, okCur := e.ObjectNew.(*vidrav1alpha1.VidraResource)
					return !okOld || !okCur || fanout.HealthDiffers(old, cur)
				},
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Watches(&vidrav1alpha1.VidraCluster{}, handler.EnqueueRequestsFromMapFunc(r.resourcesOfCluster),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				oldVC, _ := e.ObjectOld.(*vidrav1alpha1.VidraCluster)
				newVC, _ := e.ObjectNew.(*vidrav1alpha1.VidraCluster)
				return oldVC == nil || newVC == nil || oldVC.Status.Phase != newVC.Status.Phase || oldVC.Status.Mode != newVC.Status.Mode ||
					!equality.Semantic.DeepEqual(oldVC.Status.DeliveryPolicy, newVC.Status.DeliveryPolicy)
			}})).
		// A pull cluster's agent reports in its bundle's status.
		Watches(&vidrav1alpha1.VidraBundle{}, handler.EnqueueRequestsFromMapFunc(resourceOfBundle),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				oldB, _ := e.ObjectOld.(*vidrav1alpha1.VidraBundle)
				newB, _ := e.ObjectNew.(*vidrav1alpha1.VidraBundle)
				return oldB == nil || newB == nil || !equality.Semantic.DeepEqual(oldB.Status, newB.Status)
			}}))
	if r.Guards != nil {
		// A policy or binding deleted, restored or changed refuses or releases at once.
		for _, o := range r.Guards.Objects() {
			b = b.Watches(o, handler.EnqueueRequestsFromMapFunc(r.resourcesRelyingOnGuards))
		}
	}
	err := b.WithOptions(controller.Options{
		MaxConcurrentReconciles: maxConcurrentReconciles,
		NewQueue:                ctrlqueue.Requests(),
		// Sharded, every replica runs it; Reconcile skips clusters owned elsewhere.
		NeedLeaderElection: ptr.To(r.Shard == nil),
	}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up VidraResource controller: %w", err)
	}
	r.Watches.needLeader = r.Shard == nil
	if err := r.Manager.Add(r.Watches); err != nil {
		return fmt.Errorf("set up drift watches: %w", err)
	}
	return nil
}

// resourceOfBundle is the VidraResource a VidraBundle publishes: the one of its name.
func resourceOfBundle(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: obj.GetName()}}}
}
