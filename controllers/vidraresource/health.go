package vidraresource

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/celhealth"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// health reads every object and computes its kstatus: Ready needs each one Current.
// It records each object's status in the inventory, so people see it from the hub, and
// returns the objects still in progress and those that failed, each with the reason.
// The objects the apply just returned (applied, by key) are judged as returned, not read
// again and not copied: kstatus only reads them.
func health(ctx context.Context, c client.Reader, applied map[string]*unstructured.Unstructured, vr *vidrav1alpha1.VidraResource, refs []inventory.Ref, current map[string]string, checks *celhealth.Checks) (inProgress, failed []string, err error) {
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
		u, err := objectOf(ctx, c, applied, ref)
		if err != nil {
			return nil, nil, err
		}
		result, err := statusOfObject(u, checks)
		if err != nil {
			return nil, nil, fmt.Errorf("compute status of %s: %w", ref, err)
		}
		message := result.Message
		if result.Status == status.CurrentStatus {
			// The inventory says why an object is not Current (the API's promise). Of one
			// that is, kstatus's "Resource is always ready" would only fill every
			// VidraResource of ConfigMaps, on the hub and in every cache of it.
			message = ""
		}
		setObjectStatus(ref, string(result.Status), message)
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

// statusOfObject is u's state by the healthCheckExprs of its kind, else by kstatus.
func statusOfObject(u *unstructured.Unstructured, checks *celhealth.Checks) (*status.Result, error) {
	if result, ok := checks.Compute(u); ok {
		return result, nil
	}
	return status.Compute(u)
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

// reportHealth keeps Ready false until every object is Current by kstatus. Status
// changes do not trigger the drift watches, so progress is polled. Objects the apply
// just returned are judged as returned, not read again.
func (r *Reconciler) reportHealth(ctx context.Context, d *delivery) *outcome {
	vr := d.vr
	checks, err := r.healthExprs.Compile(vr.Spec.HealthCheckExprs)
	if err != nil {
		markStalled(vr, vidrav1alpha1.ReasonHealthCheckInvalid, err.Error())
		return stop(ctrl.Result{}, nil)
	}
	inProgress, failed, err := health(ctx, d.dest.client, appliedObjects(d.results), vr, d.kept, currentUnchanged(d.results, d.judged), checks)
	if late := timedOut(vr, inProgress); late != "" {
		failed, inProgress = append(failed, late), nil
	}
	switch {
	case err != nil:
		markNotReady(vr, vidrav1alpha1.ReasonProgressing, err.Error())
		return stop(ctrl.Result{}, err)
	case len(failed) > 0:
		markNotReady(vr, vidrav1alpha1.ReasonHealthCheckFailed, "failed: "+firstFew(failed))
		return stop(ctrl.Result{RequeueAfter: healthPoll}, nil)
	case len(inProgress) > 0:
		markNotReady(vr, vidrav1alpha1.ReasonProgressing, "applied; waiting for: "+firstFew(inProgress))
		setCondition(vr, vidrav1alpha1.ConditionReconciling, metav1.ConditionTrue, vidrav1alpha1.ReasonProgressing, "waiting for objects to become ready")
		vr.Status.DeployState = vidrav1alpha1.StateRunning
		return stop(ctrl.Result{RequeueAfter: healthPoll}, nil)
	}
	return nil
}

// timedOut says which objects are still in progress past spec.timeout, counted from
// when the current spec was applied ("" when none, or no timeout).
func timedOut(vr *vidrav1alpha1.VidraResource, inProgress []string) string {
	t, at := vr.Spec.Timeout, vr.Status.AppliedAt
	if len(inProgress) == 0 || t == nil || at == nil || time.Since(at.Time) < t.Duration {
		return ""
	}
	return fmt.Sprintf("still in progress %s after the spec was applied (spec.timeout): %s", t.Duration, firstFew(inProgress))
}

// healthPoll is how often objects still in progress are looked at again.
const healthPoll = 5 * time.Second

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

// appliedObjects are the objects the apply returned, by key.
func appliedObjects(results []apply.Result) map[string]*unstructured.Unstructured {
	applied := make(map[string]*unstructured.Unstructured, len(results))
	for _, res := range results {
		if res.Object != nil {
			applied[res.Ref.Key()] = res.Object
		}
	}
	return applied
}

// objectOf is the object ref names as the apply returned it, or else as the destination
// has it now.
func objectOf(ctx context.Context, c client.Reader, applied map[string]*unstructured.Unstructured, ref inventory.Ref) (*unstructured.Unstructured, error) {
	if got, ok := applied[ref.Key()]; ok && got.GroupVersionKind() == ref.GVK {
		return got, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ref.GVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		return nil, fmt.Errorf("read %s for its status: %w", ref, err)
	}
	return u, nil
}
