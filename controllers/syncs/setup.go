package syncs

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/vidra-operator/vidra/internal/fanout"
)

// SetupWithManager registers the kind's controller, watched as every sync kind's is
// (fanout.Controller).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrentReconciles int) error {
	r.resourcesWritten = fanout.NewWritten()
	if previews, ok := r.setupPreviews(); ok {
		if err := mgr.Add(previews); err != nil {
			return fmt.Errorf("add the %s previews: %w", r.Kind.SyncKind().Kind, err)
		}
	}
	return fanout.Controller{
		Kind:                    r.Kind.SyncKind(),
		MaxConcurrentReconciles: maxConcurrentReconciles,
		Guards:                  r.Guards.Objects(),
		Written:                 r.resourcesWritten,
	}.Setup(mgr, r)
}
