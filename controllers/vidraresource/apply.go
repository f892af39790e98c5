package vidraresource

import (
	"context"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// applyBundle applies the bundle in stages (CRDs and Namespaces first) and watches the
// kinds it uses for drift.
func (r *Reconciler) applyBundle(ctx context.Context, d *delivery) *outcome {
	d.results, d.applyErr = d.engine.Apply(ctx, d.objects)
	r.rememberUsedAsItIs(d.dest, d.results)
	r.Watches.Use(d.dest, d.vr.Name, inventory.Kinds(d.desired), r.onEvents(d.vr))
	return nil
}

// rememberUsedAsItIs remembers the destination namespaces the apply found to exist and
// not be Vidra's, so that they are read, not created, next time.
func (r *Reconciler) rememberUsedAsItIs(dest *target, results []apply.Result) {
	for _, res := range results {
		if res.Action == apply.UsedAsItIs {
			r.sharedApplyOf(dest.name).setUnmanaged(res.Ref.Name)
		}
	}
}

// onEvents says whether the VidraResource's drift is repaired as it happens, rather than at
// the next resync.
func (r *Reconciler) onEvents(vr *vidrav1alpha1.VidraResource) bool {
	return r.ReconcileOnEvents || vr.Spec.Destination.ReconcileOnEvents || vr.Spec.ReconcileOnEvents
}
