package infrahubsync

import (
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// SetupWithManager registers the controller with the hub's manager, watched as every
// sync kind's is (fanout.Controller).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrentReconciles int) error {
	r.resourcesWritten = fanout.NewWritten()
	return fanout.Controller{
		Kind:                    vidrav1alpha1.LookupSyncKind("InfrahubSync"),
		MaxConcurrentReconciles: maxConcurrentReconciles,
		Guards:                  r.Guards.Objects(),
		Written:                 r.resourcesWritten,
	}.Setup(mgr, r)
}
