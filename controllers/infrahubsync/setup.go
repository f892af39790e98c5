package infrahubsync

import (
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Backoff of failed syncs: soon at first, never slower than this.
const (
	backoffBase = time.Second
	backoffMax  = 5 * time.Minute
)

// SetupWithManager registers the controller with the hub's manager. It syncs an
// InfrahubSync when its spec changes or a sync is requested (the requested-at
// annotation, set by webhooks), when one of its VidraResources is changed or deleted by
// someone else, and when enrolled clusters join or leave its clusterSelector.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrentReconciles int) error {
	requested := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[vidrav1alpha1.RequestedAtAnnotation] != e.ObjectNew.GetAnnotations()[vidrav1alpha1.RequestedAtAnnotation]
	}}
	edited := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			!maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
			!maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations())
	}}
	relabeled := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("infrahubsync").
		For(&vidrav1alpha1.InfrahubSync{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, requested))).
		Owns(&vidrav1alpha1.VidraResource{}, builder.WithPredicates(edited)).
		Watches(&vidrav1alpha1.VidraCluster{}, handler.EnqueueRequestsFromMapFunc(r.syncsWithSelector), builder.WithPredicates(relabeled)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: maxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](backoffBase, backoffMax),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up InfrahubSync controller: %w", err)
	}
	return nil
}

// syncsWithSelector requeues the InfrahubSyncs that fan out by clusterSelector, whose
// selection a cluster joining, leaving or being relabeled may change.
func (r *Reconciler) syncsWithSelector(ctx context.Context, _ client.Object) []reconcile.Request {
	var list vidrav1alpha1.InfrahubSyncList
	if err := r.Hub.List(ctx, &list); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, ihs := range list.Items {
		if ihs.Spec.Destination.ClusterSelector != nil {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ihs)})
		}
	}
	return requests
}
