package syncs

import (
	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// stallHealthChecks stalls a sync whose spec.healthCheckExprs do not compile, naming
// the expression and why: each of its VidraResources would stall the same way.
func (r *Reconciler) stallHealthChecks(obj Object) bool {
	checks, _ := obj.HealthChecks()
	if _, err := r.healthExprs.Compile(checks); err != nil {
		msg := "spec." + err.Error()
		markStalled(obj, vidrav1alpha1.ReasonHealthCheckInvalid, msg)
		r.warn(obj, vidrav1alpha1.ReasonHealthCheckInvalid, msg)
		return true
	}
	return false
}
