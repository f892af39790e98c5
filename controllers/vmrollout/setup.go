package vmrollout

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/runtime/ctrlqueue"
)

// SetupWithManager registers the controller: it watches the Vidra-managed
// VirtualMachines of every engaged cluster that serves them (and of the local cluster,
// when it does), and VidraResources on the hub, whose rollout settings or generation
// may change what is to be done.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager, maxConcurrentReconciles int) error {
	local := mgr.GetLocalManager()
	localServesVMs := !r.DisableLocalCluster && servesVMs(local)
	err := mcbuilder.ControllerManagedBy(mgr).
		Named("vmrollout").
		Watches(&kubevirtv1.VirtualMachine{}, mchandler.EnqueueRequestsFromMapFunc(r.ownersOfVM),
			mcbuilder.WithEngageWithLocalCluster(localServesVMs),
			mcbuilder.WithEngageWithProviderClusters(true),
			// A cluster without KubeVirt has nothing to roll out, and a watch of a kind
			// it does not serve would fail its engagement.
			mcbuilder.WithClusterFilter(func(_ multicluster.ClusterName, cl cluster.Cluster) bool { return servesVMs(cl) }),
			mcbuilder.WithPredicates(vmChanged())).
		Watches(&vidrav1alpha1.VidraResource{}, resourceHandler,
			mcbuilder.WithEngageWithLocalCluster(true),
			mcbuilder.WithEngageWithProviderClusters(false),
			mcbuilder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, clusterChanged()))).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			MaxConcurrentReconciles: maxConcurrentReconciles,
			NewQueue:                ctrlqueue.ClusterRequests(),
			// The multicluster builder does not read the manager's controller defaults.
			SkipNameValidation: local.GetControllerOptions().SkipNameValidation,
			// Sharded, every replica runs it; Reconcile skips clusters owned elsewhere.
			NeedLeaderElection: ptr.To(r.Shard == nil),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up VM rollout controller: %w", err)
	}
	return nil
}

// servesVMs reports whether a cluster serves kubevirt.io/v1 VirtualMachines.
func servesVMs(cl interface{ GetRESTMapper() meta.RESTMapper }) bool {
	_, err := cl.GetRESTMapper().RESTMapping(kubevirtv1.VirtualMachineGroupVersionKind.GroupKind(), "v1")
	return err == nil
}

// ownersOfVM maps a VM to the VidraResource of this hub that rolls it out; the cluster is
// the VM's.
func (r *Reconciler) ownersOfVM(_ context.Context, obj client.Object) []reconcile.Request {
	vm, ok := obj.(*kubevirtv1.VirtualMachine)
	if !ok {
		return nil
	}
	if name := rolloutOwner(vm, r.HubID); name != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
	}
	return nil
}

// resourceHandler maps a VidraResource on the hub to a request for the cluster it
// delivers to, which its status names.
func resourceHandler(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(func(_ context.Context, obj client.Object) []mcreconcile.Request {
		vr, ok := obj.(*vidrav1alpha1.VidraResource)
		if !ok || vr.Status.Cluster == "" {
			return nil
		}
		cluster := multicluster.ClusterName(vr.Status.Cluster)
		if vr.Status.Cluster == destination.LocalClusterLabel {
			cluster = destination.LocalCluster
		}
		return []mcreconcile.Request{{Request: reconcile.Request{NamespacedName: client.ObjectKey{Name: vr.Name}}, ClusterName: cluster}}
	})
}

// vmChanged passes VM events that can change a rollout: creation, deletion, status
// (RestartRequired, readiness), and the restart record's annotations.
func vmChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldVM, okOld := e.ObjectOld.(*kubevirtv1.VirtualMachine)
		newVM, okNew := e.ObjectNew.(*kubevirtv1.VirtualMachine)
		if !okOld || !okNew {
			return true
		}
		return !reflect.DeepEqual(oldVM.Status, newVM.Status) || !reflect.DeepEqual(oldVM.Annotations, newVM.Annotations) ||
			oldVM.Generation != newVM.Generation
	}}
}

// clusterChanged passes a VidraResource whose status names a new cluster.
func clusterChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldVR, okOld := e.ObjectOld.(*vidrav1alpha1.VidraResource)
		newVR, okNew := e.ObjectNew.(*vidrav1alpha1.VidraResource)
		return !okOld || !okNew || oldVR.Status.Cluster != newVR.Status.Cluster
	}}
}
