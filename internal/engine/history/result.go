package history

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// maxResult bounds a result: it is an annotation, shown in a table.
const maxResult = 200

// CurrentResult is how the revision a VidraResource delivers now stands, as its revision
// records it once a newer one replaces it: Ready, Unknown (not judged yet), or why it is
// not Ready, the reason first ("ApplyFailed: ...").
func CurrentResult(vr *vidrav1alpha1.VidraResource) string {
	ready := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	switch {
	case ready == nil:
		return "Unknown"
	case ready.Status == metav1.ConditionTrue:
		return "Ready"
	}
	return conditions.Cut(ready.Reason+": "+ready.Message, maxResult, "...")
}
