package vidraresource

import (
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// The conditions follow kstatus: Reconciling while working, Stalled when only a change of
// the VidraResource can help, Ready when the bundle is in effect. DeployState and
// lastError mirror them for users of the original Vidra.

func setCondition(vr *vidrav1alpha1.VidraResource, conditionType string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(vr, conditionType, status, reason, message)
}

func markReconciling(vr *vidrav1alpha1.VidraResource) {
	conditions.MarkReconciling(vr, vidrav1alpha1.ReasonProgressing, "applying the manifest")
	vr.Status.DeployState = vidrav1alpha1.StateRunning
}

// markReady marks the bundle delivered. lastSyncTime moves only when the reconcile changed
// the cluster (changed), when the status did not describe this generation yet (an earlier
// reconcile's changes whose status write failed), or was never set: an unchanged resync
// then writes nothing.
func markReady(vr *vidrav1alpha1.VidraResource, message string, changed bool) {
	conditions.MarkReady(vr, vidrav1alpha1.ReasonSucceeded, message)
	vr.Status.DeployState = vidrav1alpha1.StateSucceeded
	vr.Status.LastError = ""
	if changed || vr.Status.LastSyncTime == nil || vr.Status.ObservedGeneration != vr.Generation {
		now := metav1.Now()
		vr.Status.LastSyncTime = &now
	}
}

func markNotReady(vr *vidrav1alpha1.VidraResource, reason, message string) {
	conditions.MarkNotReady(vr, reason, message)
	vr.Status.DeployState = vidrav1alpha1.StateFailed
	vr.Status.LastError = conditions.Bounded(message)
}

func markStalled(vr *vidrav1alpha1.VidraResource, reason, message string) {
	markNotReady(vr, reason, message)
	conditions.MarkStalled(vr, reason, message)
}

func markSuspended(vr *vidrav1alpha1.VidraResource) {
	setCondition(vr, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended, "suspended: nothing is applied or pruned")
	conditions.Remove(vr, vidrav1alpha1.ConditionReconciling)
	vr.Status.DeployState = vidrav1alpha1.StatePending
}

func apiequalitySemantic(a, b vidrav1alpha1.VidraResourceStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

// markConflict shows the conflicts on both sides: refused lists this VidraResource's
// fields held by another owner, held those of this VidraResource that others were refused.
func markConflict(vr *vidrav1alpha1.VidraResource, refused, held string) {
	var parts []string
	if refused != "" {
		parts = append(parts, "refused: "+refused)
	}
	if held != "" {
		parts = append(parts, "in effect, but "+held)
	}
	if len(parts) == 0 {
		conditions.Remove(vr, vidrav1alpha1.ConditionConflict)
		return
	}
	setCondition(vr, vidrav1alpha1.ConditionConflict, metav1.ConditionTrue, vidrav1alpha1.ReasonConflict, strings.Join(parts, "; "))
}
