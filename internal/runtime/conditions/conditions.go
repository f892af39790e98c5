// Package conditions sets the kstatus conditions (Ready, Reconciling, Stalled) that every
// kind of this API carries, so each controller states only what happened, not how the
// three conditions move together.
package conditions

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Object is an API object with conditions in its status.
type Object interface {
	GetGeneration() int64
	StatusConditions() *[]metav1.Condition
}

// IsReady says whether the object is Ready for its current generation (not for one it
// had before).
func IsReady(obj Object) bool {
	c := meta.FindStatusCondition(*obj.StatusConditions(), vidrav1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration()
}

// Set sets one condition, observed at the object's generation.
func Set(obj Object, conditionType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(obj.StatusConditions(), metav1.Condition{
		Type: conditionType, Status: status, Reason: reason, Message: Bounded(message), ObservedGeneration: obj.GetGeneration(),
	})
}

// MaxMessage is the longest message a condition may have: the API server refuses a
// longer one, and with it the whole status.
const MaxMessage = 32768

// Bounded is message cut to MaxMessage bytes, saying so.
func Bounded(message string) string {
	return Cut(message, MaxMessage, " … (cut)")
}

// Cut is text cut to at most limit bytes, at a character boundary, ending in mark when
// it was cut: for what the API server bounds, such as a condition's message or an
// Event's note, which it refuses whole when too long.
func Cut(text string, limit int, mark string) string {
	if len(text) <= limit {
		return text
	}
	return strings.ToValidUTF8(text[:limit-len(mark)], "") + mark
}

// Remove removes one condition.
func Remove(obj Object, conditionType string) {
	meta.RemoveStatusCondition(obj.StatusConditions(), conditionType)
}

// MarkReconciling says the controller is working towards the desired state.
func MarkReconciling(obj Object, reason, message string) {
	Set(obj, vidrav1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, message)
	Remove(obj, vidrav1alpha1.ConditionStalled)
}

// MarkReady says the desired state is in effect.
func MarkReady(obj Object, reason, message string) {
	Set(obj, vidrav1alpha1.ConditionReady, metav1.ConditionTrue, reason, message)
	Remove(obj, vidrav1alpha1.ConditionReconciling)
	Remove(obj, vidrav1alpha1.ConditionStalled)
}

// MarkNotReady says the desired state is not in effect, and why.
func MarkNotReady(obj Object, reason, message string) {
	Set(obj, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
}

// MarkStalled says only a change of the object or its inputs can make progress.
func MarkStalled(obj Object, reason, message string) {
	MarkNotReady(obj, reason, message)
	Set(obj, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, reason, message)
	Remove(obj, vidrav1alpha1.ConditionReconciling)
}
