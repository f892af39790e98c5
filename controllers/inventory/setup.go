package inventory

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/vidra-operator/vidra/internal/fleet/argocd"
)

// concurrentEnrollments is how many clusters of an inventory are enrolled at once.
const concurrentEnrollments = 8

// SetupClusterAPI registers Cluster API's inventory with the hub's manager: a cache of
// the Clusters of namespaces alone, and of the enrollment Secrets it wrote (so that one
// whose Cluster went while the operator was down is removed), and its controller. The hub
// must serve Cluster API's Cluster.
func SetupClusterAPI(mgr manager.Manager, namespaces []string, e *Enroller) error {
	c, obj, err := objectCache(mgr, ClusterAPIInventory, ClusterAPIGroupKind, namespaces, e.Namespace)
	if err != nil {
		return err
	}
	r := &ClusterAPI{Clusters: c, GVK: obj.GroupVersionKind(), Secrets: mgr.GetAPIReader(), Enroller: e}
	return watchObjects(mgr, "inventory-cluster-api", c, obj, r)
}

// SetupClusterProfile registers the ClusterProfile inventory with the hub's manager, as
// SetupClusterAPI does Cluster API's. The hub must serve ClusterProfile.
func SetupClusterProfile(mgr manager.Manager, namespaces []string, e *Enroller) error {
	c, obj, err := objectCache(mgr, ClusterProfileInventory, ClusterProfileGroupKind, namespaces, e.Namespace)
	if err != nil {
		return err
	}
	r := &ClusterProfile{Profiles: c, GVK: obj.GroupVersionKind(), Secrets: mgr.GetAPIReader(), Enroller: e}
	return watchObjects(mgr, "inventory-cluster-profile", c, obj, r)
}

// SetupPublisher registers the publisher of ClusterProfiles in namespace with the hub's
// manager: a cache of the profiles there, and a controller of VidraClusters. The hub must
// serve ClusterProfile.
func SetupPublisher(mgr manager.Manager, namespace string) error {
	mapping, err := mgr.GetRESTMapper().RESTMapping(ClusterProfileGroupKind)
	if err != nil {
		return fmt.Errorf("--publish-cluster-profiles: the hub serves no %s (install the Cluster Inventory API's CRDs): %w", ClusterProfileGroupKind, err)
	}
	profiles := &unstructured.Unstructured{}
	profiles.SetGroupVersionKind(mapping.GroupVersionKind)
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{profiles: {Namespaces: map[string]cache.Config{namespace: {}}}}})
	if err != nil {
		return fmt.Errorf("--publish-cluster-profiles: build cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	r := &Publisher{Hub: mgr.GetClient(), Profiles: c, Secrets: mgr.GetAPIReader(), Namespace: namespace, GVK: mapping.GroupVersionKind}
	byName := func(_ context.Context, o *unstructured.Unstructured) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	}
	return ctrl.NewControllerManagedBy(mgr).Named("publish-cluster-profiles").
		For(&vidrav1alpha1.VidraCluster{}).
		WatchesRawSource(source.Kind(c, profiles, handler.TypedEnqueueRequestsFromMapFunc(byName))).
		Complete(r)
}

// objectCache is a cache of an inventory's objects (of kind, at the version the hub
// serves) in namespaces alone, and of the enrollment Secrets it wrote in secretNamespace.
func objectCache(mgr manager.Manager, inventory string, kind schema.GroupKind, namespaces []string, secretNamespace string) (cache.Cache, *unstructured.Unstructured, error) {
	mapping, err := mgr.GetRESTMapper().RESTMapping(kind)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster inventory %s: the hub serves no %s (install its CRDs, or leave %s out of --cluster-inventory): %w",
			inventory, kind, inventory, err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	listed := map[string]cache.Config{}
	for _, ns := range namespaces {
		listed[ns] = cache.Config{}
	}
	written := labels.SelectorFromSet(labels.Set{vidrav1alpha1.InventoryLabel: inventory})
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			obj:              {Namespaces: listed},
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{secretNamespace: {}}, Label: written},
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster inventory %s: build cache: %w", inventory, err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, nil, err
	}
	return c, obj, nil
}

// watchObjects runs r on each of the inventory's objects, and on the object of each
// enrollment Secret it wrote.
func watchObjects(mgr manager.Manager, name string, c cache.Cache, obj *unstructured.Unstructured, r reconcile.Reconciler) error {
	return ctrl.NewControllerManagedBy(mgr).Named(name).
		// A cluster's enrollment waits on its API server (the identity, a token): one
		// slow cluster does not hold the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentEnrollments}).
		WatchesRawSource(source.Kind(c, obj, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
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

// SetupArgoCD registers Argo CD's inventory with the hub's manager: a cache of the Argo
// CD cluster Secrets of namespaces alone (labeled argocd.argoproj.io/secret-type:
// cluster; no other Secret of theirs), one of the enrollment Secrets it wrote, and its
// controller.
func SetupArgoCD(mgr manager.Manager, namespaces []string, e *Enroller) error {
	clusters := labels.SelectorFromSet(labels.Set{argocd.SecretTypeLabel: argocd.SecretTypeCluster})
	listed := map[string]cache.Config{}
	for _, ns := range namespaces {
		listed[ns] = cache.Config{LabelSelector: clusters}
	}
	argo, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultNamespaces: listed})
	if err != nil {
		return fmt.Errorf("cluster inventory %s: build cache: %w", ArgoCDInventory, err)
	}
	written, err := writtenCache(mgr, e.Namespace, ArgoCDInventory)
	if err != nil {
		return err
	}
	for _, c := range []cache.Cache{argo, written} {
		if err := mgr.Add(c); err != nil {
			return err
		}
	}
	r := &ArgoCD{Secrets: argo, Written: written, Enroller: e}
	return ctrl.NewControllerManagedBy(mgr).Named("inventory-argocd").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentEnrollments}).
		WatchesRawSource(source.Kind(argo, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		WatchesRawSource(source.Kind(written, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(sourceOf))).
		Complete(r)
}

// writtenCache is a cache of the enrollment Secrets an inventory wrote, in the operator's
// namespace.
func writtenCache(mgr manager.Manager, namespace, inventory string) (cache.Cache, error) {
	selector := labels.SelectorFromSet(labels.Set{vidrav1alpha1.InventoryLabel: inventory})
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {LabelSelector: selector}}})
	if err != nil {
		return nil, fmt.Errorf("cluster inventory %s: build cache: %w", inventory, err)
	}
	return c, nil
}
