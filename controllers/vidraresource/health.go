package vidraresource

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/conditions"
	"github.com/vidra-operator/vidra/internal/inventory"
)

// health reads every object and computes its kstatus: Ready needs each one Current.
// It records each object's status in the inventory, so people see it from the hub, and
// returns the objects still in progress and those that failed, each with the reason.
func health(ctx context.Context, c client.Client, vr *vidrav1alpha1.VidraResource, refs []inventory.Ref, current map[string]string) (inProgress, failed []string, err error) {
	entries := make(map[string]*vidrav1alpha1.ManagedResource, len(vr.Status.ManagedResources))
	for i := range vr.Status.ManagedResources {
		if ref, ok := inventory.FromEntry(vr.Status.ManagedResources[i]); ok {
			entries[ref.Key()] = &vr.Status.ManagedResources[i]
		}
	}
	// setObjectStatus records an object's kstatus on its inventory entry (found by key: a
	// bundle may have thousands). Messages are cut, and left out once the inventory's
	// share of them is spent, so the status stays within what inventoryTooLarge allowed.
	budget := messageAllowance*len(refs) + messageReserve
	setObjectStatus := func(ref inventory.Ref, st, message string) {
		m := entries[ref.Key()]
		if m == nil {
			return
		}
		message = conditions.Cut(message, maxEntryMessage, "...")
		if len(message) > budget {
			message = ""
		}
		budget -= len(message)
		m.Status, m.Message = st, message
	}
	for _, ref := range refs {
		if message, ok := current[ref.Key()]; ok {
			// As judged last time, message included: an unchanged resync writes nothing.
			setObjectStatus(ref, string(status.CurrentStatus), message)
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ref.GVK)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
			return nil, nil, fmt.Errorf("read %s for its status: %w", ref, err)
		}
		result, err := status.Compute(u)
		if err != nil {
			return nil, nil, fmt.Errorf("compute status of %s: %w", ref, err)
		}
		setObjectStatus(ref, string(result.Status), result.Message)
		switch result.Status {
		case status.CurrentStatus:
		case status.FailedStatus:
			failed = append(failed, fmt.Sprintf("%s: %s", ref, result.Message))
		default:
			inProgress = append(inProgress, fmt.Sprintf("%s: %s", ref, result.Message))
		}
	}
	return inProgress, failed, nil
}

// statusOf is the kstatus last recorded of each object of the inventory, by key.
func statusOf(managed []vidrav1alpha1.ManagedResource) map[string]vidrav1alpha1.ManagedResource {
	judged := make(map[string]vidrav1alpha1.ManagedResource, len(managed))
	for _, m := range managed {
		if ref, ok := inventory.FromEntry(m); ok {
			judged[ref.Key()] = m
		}
	}
	return judged
}

// currentUnchanged are the objects the apply found unchanged since this owner last
// applied them (so not even read) and that were Current then: they still are, as nothing
// about them changed. Each maps to the message it was judged with.
func currentUnchanged(applied []apply.Result, judged map[string]vidrav1alpha1.ManagedResource) map[string]string {
	current := map[string]string{}
	for _, res := range applied {
		if m, ok := judged[res.Ref.Key()]; ok && res.Action == apply.Unchanged && res.Object == nil && m.Status == string(status.CurrentStatus) {
			current[res.Ref.Key()] = m.Message
		}
	}
	return current
}
