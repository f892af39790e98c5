package sourcesync

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/conditions"
)

// The conditions follow kstatus: Reconciling while syncing, Stalled when only a change of
// the sync or its Secrets helps, Ready when the newest revision is delivered.

func markReconciling(obj Object, message string) {
	conditions.MarkReconciling(obj, vidrav1alpha1.ReasonProgressing, message)
}

func markSucceeded(obj Object, message string) {
	conditions.MarkReady(obj, vidrav1alpha1.ReasonSucceeded, message)
	if src := obj.SourceStatus().Source; src != nil {
		src.Message = ""
	}
}

func markFailed(obj Object, reason, message string) {
	conditions.MarkNotReady(obj, reason, message)
	conditions.Remove(obj, vidrav1alpha1.ConditionReconciling)
	if src := obj.SourceStatus().Source; src != nil {
		src.Message = conditions.Bounded(message)
	}
}

func markStalled(obj Object, reason, message string) {
	markFailed(obj, reason, message)
	conditions.MarkStalled(obj, reason, message)
}

func markSuspended(obj Object) {
	conditions.Set(obj, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended, "suspended: nothing is fetched, written or removed")
	conditions.Remove(obj, vidrav1alpha1.ConditionReconciling)
}

func statusEqual(a, b *vidrav1alpha1.SourceSyncStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
