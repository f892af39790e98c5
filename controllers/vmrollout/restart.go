package vmrollout

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// How a restart was asked for.
const (
	viaRestartAPI = "restart-api"
	viaVMIDelete  = "vmi-delete"
)

// errNotNow is KubeVirt answering 409 to a restart: the VM is not in a state to restart
// (not running, or already restarting). It is retried later, not a failure.
var errNotNow = errors.New("KubeVirt cannot restart it now")

// errNoRestart is a restart that neither the API nor a VMI deletion can make.
var errNoRestart = errors.New("the restart API (subresources.kubevirt.io) is not served and the VM's runStrategy is not Always, so deleting its VMI would not bring it back")

// restart restarts a VM without changing what the user declared: KubeVirt's restart
// action, which virt-api serves as a subresource that controller-runtime's clients do
// not reach, so through a raw REST client; when that API is not served, deleting the
// VMI of an Always VM so KubeVirt starts a new one. It returns how it restarted.
func restart(ctx context.Context, cl cluster.Cluster, vm *kubevirtv1.VirtualMachine, vmiUID string) (string, error) {
	rc, err := subresourcesClient(cl)
	if err != nil {
		return "", err
	}
	err = rc.Put().Namespace(vm.Namespace).Resource("virtualmachines").Name(vm.Name).SubResource("restart").
		Body([]byte("{}")).SetHeader("Content-Type", "application/json").Do(ctx).Error()
	switch {
	case err == nil:
		return viaRestartAPI, nil
	case apierrors.IsConflict(err):
		return "", fmt.Errorf("%w: %s", errNotNow, err.Error())
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("restart VM %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	// Not served: the VMI goes, and KubeVirt recreates it from the current template.
	if strategy, _ := vm.RunStrategy(); strategy != kubevirtv1.RunStrategyAlways {
		return "", errNoRestart
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name = vm.Namespace, vm.Name
	uid := types.UID(vmiUID)
	if err := cl.GetClient().Delete(ctx, vmi, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("delete VMI %s/%s to restart it: %w", vm.Namespace, vm.Name, err)
	}
	return viaVMIDelete, nil
}

// subresourcesClient is a REST client of subresources.kubevirt.io/v1 that shares the
// cluster's HTTP client, and so its connections and limits.
func subresourcesClient(cl cluster.Cluster) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(cl.GetConfig())
	cfg.GroupVersion = &schema.GroupVersion{Group: kubevirtv1.SubresourceGroupName, Version: "v1"}
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(cl.GetScheme()).WithoutConversion()
	rc, err := rest.RESTClientForConfigAndClient(cfg, cl.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", kubevirtv1.SubresourceGroupName, err)
	}
	return rc, nil
}
