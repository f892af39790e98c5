package syncs

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// The conditions follow kstatus: Reconciling while syncing, Stalled when only a change of
// the sync or its Secrets helps, Ready when what the source holds is delivered. A kind
// mirrors them in fields of its own (Kind.Mirror).

func markReconciling(obj Object) {
	conditions.MarkReconciling(obj, vidrav1alpha1.ReasonProgressing, "reading the source")
}

func markSucceeded(obj Object, message string) {
	conditions.MarkReady(obj, vidrav1alpha1.ReasonSucceeded, message)
}

func markFailed(obj Object, reason, message string) {
	conditions.MarkNotReady(obj, reason, message)
	conditions.Remove(obj, vidrav1alpha1.ConditionReconciling)
}

func markStalled(obj Object, reason, message string) {
	markFailed(obj, reason, message)
	conditions.MarkStalled(obj, reason, message)
}

// markPending: delivered, waiting for the source to generate the rest, or for what was
// delivered to be in effect.
func markPending(obj Object, message string) {
	conditions.MarkNotReady(obj, vidrav1alpha1.ReasonProgressing, message)
	conditions.MarkReconciling(obj, vidrav1alpha1.ReasonProgressing, message)
}

func markSuspended(obj Object) {
	conditions.Set(obj, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended, "suspended: nothing is read, written or removed")
	conditions.Remove(obj, vidrav1alpha1.ConditionReconciling)
}

// Outcome is a sync's Ready condition in the original Vidra's words: its state, and its
// last error ("" when none). keep says the last error stays as it was (suspended); ok is
// false before the sync has a Ready condition.
func Outcome(obj Object) (state vidrav1alpha1.State, lastError string, keep, ok bool) {
	c := meta.FindStatusCondition(*obj.StatusConditions(), vidrav1alpha1.ConditionReady)
	switch {
	case c == nil:
		return "", "", true, false
	case c.Status == metav1.ConditionTrue:
		return vidrav1alpha1.StateSucceeded, "", false, true
	case c.Reason == vidrav1alpha1.ReasonSuspended:
		return vidrav1alpha1.StatePending, "", true, true
	case c.Reason == vidrav1alpha1.ReasonProgressing:
		return vidrav1alpha1.StateRunning, "", false, true
	case c.Reason == vidrav1alpha1.ReasonNoArtifacts:
		return vidrav1alpha1.StateStale, c.Message, false, true
	}
	return vidrav1alpha1.StateFailed, c.Message, false, true
}
