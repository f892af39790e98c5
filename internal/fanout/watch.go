package fanout

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// HealthChanged passes the changes of a VidraResource labeled by a sync (label) that its
// sync's Ready or progressive rollout waits for: its Ready or VMRollout condition (its
// status or reason), or the generation its status describes.
func HealthChanged(label string) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*vidrav1alpha1.VidraResource)
			cur, okCur := e.ObjectNew.(*vidrav1alpha1.VidraResource)
			return okOld && okCur && cur.Labels[label] != "" && HealthDiffers(old, cur)
		},
	}
}

// HealthDiffers says whether cur's health differs from old's as a sync judges it
// (Judge): its Ready or VMRollout condition (status, reason or the generation it
// describes), or the generation its status describes.
func HealthDiffers(old, cur *vidrav1alpha1.VidraResource) bool {
	if old.Status.ObservedGeneration != cur.Status.ObservedGeneration {
		return true
	}
	for _, t := range []string{vidrav1alpha1.ConditionReady, vidrav1alpha1.ConditionVMRollout} {
		a, b := meta.FindStatusCondition(old.Status.Conditions, t), meta.FindStatusCondition(cur.Status.Conditions, t)
		if (a == nil) != (b == nil) || (a != nil && (a.Status != b.Status || a.Reason != b.Reason || a.ObservedGeneration != b.ObservedGeneration)) {
			return true
		}
	}
	return false
}
