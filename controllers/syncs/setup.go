package syncs

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/vidra-operator/vidra/internal/fanout"
)

// SetupWithManager registers the kind's controller, watched as every sync kind's is
// (fanout.Controller).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrentReconciles int) error {
	r.resourcesWritten = fanout.NewWritten()
	return fanout.Controller{
		Kind:                    r.Kind.SyncKind(),
		MaxConcurrentReconciles: maxConcurrentReconciles,
		Guards:                  r.Guards.Objects(),
		Written:                 r.resourcesWritten,
	}.Setup(mgr, r)
}
