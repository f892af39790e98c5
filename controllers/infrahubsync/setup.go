package infrahubsync

import (
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/vidra-operator/vidra/internal/fanout"
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
		old, cur := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
		return old[vidrav1alpha1.RequestedAtAnnotation] != cur[vidrav1alpha1.RequestedAtAnnotation] ||
			old[vidrav1alpha1.ResumeRequestedAtAnnotation] != cur[vidrav1alpha1.ResumeRequestedAtAnnotation]
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
		Watches(&vidrav1alpha1.VidraResource{}, handler.EnqueueRequestsFromMapFunc(r.rolloutOf), builder.WithPredicates(healthChanged)).
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

// healthChanged passes the VidraResource changes a progressive rollout waits for: its
// Ready or VMRollout condition, or the generation its status describes.
var healthChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*vidrav1alpha1.VidraResource)
		cur, okCur := e.ObjectNew.(*vidrav1alpha1.VidraResource)
		if !okOld || !okCur || cur.Labels[vidrav1alpha1.InfrahubSyncLabel] == "" {
			return false
		}
		if old.Status.ObservedGeneration != cur.Status.ObservedGeneration {
			return true
		}
		for _, t := range []string{vidrav1alpha1.ConditionReady, vidrav1alpha1.ConditionVMRollout} {
			a, b := meta.FindStatusCondition(old.Status.Conditions, t), meta.FindStatusCondition(cur.Status.Conditions, t)
			if (a == nil) != (b == nil) || (a != nil && (a.Status != b.Status || a.ObservedGeneration != b.ObservedGeneration)) {
				return true
			}
		}
		return false
	},
}

// rolloutOf requeues the progressive InfrahubSync a VidraResource belongs to: its health
// may let the rollout go on, or fail it.
func (r *Reconciler) rolloutOf(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[vidrav1alpha1.InfrahubSyncLabel]
	ihs := &vidrav1alpha1.InfrahubSync{}
	if name == "" || r.Hub.Get(ctx, client.ObjectKey{Name: name}, ihs) != nil || !fanout.Progressive(ihs.Spec.Rollout) || !metav1.IsControlledBy(obj, ihs) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
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
