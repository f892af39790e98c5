package vmrollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotations recording a restart on the VM itself, so that no rollout state lives only
// in the operator's memory.
const (
	annotationPrefix      = "vmrollout.vidra.infrahub.operators.com/"
	restartFromAnnotation = annotationPrefix + "restart-from-vmi"
	restartAtAnnotation   = annotationPrefix + "restart-started"
	restartGenAnnotation  = annotationPrefix + "restart-generation"
	restartFailAnnotation = annotationPrefix + "restart-failed"
)

// recordOf reads the restart recorded on a VM; nil when none is.
func recordOf(vm *kubevirtv1.VirtualMachine) *restartRecord {
	a := vm.Annotations
	from, ok := a[restartFromAnnotation]
	if !ok {
		return nil
	}
	started, err := time.Parse(time.RFC3339Nano, a[restartAtAnnotation])
	if err != nil {
		started = time.Time{} // unreadable: it times out at once, pausing for a person
	}
	generation, _ := strconv.ParseInt(a[restartGenAnnotation], 10, 64)
	return &restartRecord{fromVMI: types.UID(from), started: started, generation: generation, failed: a[restartFailAnnotation] == "true"}
}

// writeRecord sets (or, with nil, removes) the restart record on a VM by a merge patch of
// its annotations, leaving every other field to its owners.
func writeRecord(ctx context.Context, c client.Client, vm *kubevirtv1.VirtualMachine, r *restartRecord) error {
	annotations := map[string]any{
		restartFromAnnotation: nil, restartAtAnnotation: nil, restartGenAnnotation: nil, restartFailAnnotation: nil,
	}
	if r != nil {
		annotations[restartFromAnnotation] = string(r.fromVMI)
		annotations[restartAtAnnotation] = r.started.UTC().Format(time.RFC3339Nano)
		annotations[restartGenAnnotation] = strconv.FormatInt(r.generation, 10)
		if r.failed {
			annotations[restartFailAnnotation] = "true"
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, vm, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("record restart on VM %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}
