package inventory

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// concurrentEnrollments is how many clusters of an inventory are enrolled at once.
const concurrentEnrollments = 8

// SetupClusterAPI registers Cluster API's inventory with the hub's manager: a cache of
// the Clusters of namespaces alone, and of the enrollment Secrets it wrote (so that one
// whose Cluster went while the operator was down is removed), and its controller. The hub
// must serve Cluster API's Cluster.
func SetupClusterAPI(mgr manager.Manager, namespaces []string, e *Enroller) error {
	mapping, err := mgr.GetRESTMapper().RESTMapping(ClusterAPIGroupKind)
	if err != nil {
		return fmt.Errorf("cluster inventory %s: the hub serves no %s (install Cluster API's CRDs, or leave %s out of --cluster-inventory): %w",
			ClusterAPIInventory, ClusterAPIGroupKind, ClusterAPIInventory, err)
	}
	clusters := &unstructured.Unstructured{}
	clusters.SetGroupVersionKind(mapping.GroupVersionKind)
	listed := map[string]cache.Config{}
	for _, ns := range namespaces {
		listed[ns] = cache.Config{}
	}
	written := labels.SelectorFromSet(labels.Set{vidrav1alpha1.InventoryLabel: ClusterAPIInventory})
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			clusters:         {Namespaces: listed},
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{e.Namespace: {}}, Label: written},
		},
	})
	if err != nil {
		return fmt.Errorf("cluster inventory %s: build cache: %w", ClusterAPIInventory, err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	r := &ClusterAPI{Clusters: c, GVK: mapping.GroupVersionKind, Secrets: mgr.GetAPIReader(), Enroller: e}
	return ctrl.NewControllerManagedBy(mgr).Named("inventory-cluster-api").
		// A cluster's enrollment waits on its API server (the identity, a token): one
		// slow cluster does not hold the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentEnrollments}).
		WatchesRawSource(source.Kind(c, clusters, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
		WatchesRawSource(source.Kind(c, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(sourceOf))).
		Complete(r)
}

// sourceOf is the inventory object an enrollment Secret was written for.
func sourceOf(_ context.Context, s *corev1.Secret) []reconcile.Request {
	ns, name, ok := strings.Cut(s.Annotations[vidrav1alpha1.InventorySourceAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}
