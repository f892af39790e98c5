package vidraresource

import (
	"context"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// pruneStale releases what left the bundle (Namespaces and CRDs last), once the bundle
// applied whole, and records the inventory that remains: what the bundle names and this
// VidraResource tracks, and what could not be released, so a failed delete is tried again.
func (r *Reconciler) pruneStale(ctx context.Context, d *delivery) *outcome {
	stale := inventory.Difference(d.previous, d.desired)
	unreleased := inventory.NewSet(stale)
	if len(stale) > 0 && d.applyErr == nil && len(d.mapErrs) == 0 {
		d.released, d.pruneErr = d.engine.Release(ctx, stale, prunes(d.vr))
		unreleased = inventory.Set{}
		for _, res := range d.released {
			if res.Err != nil {
				unreleased.Add(res.Ref)
			}
		}
		r.eventResults(d.vr, d.released)
	}
	d.kept = tracked(d.desired, d.results)
	for _, ref := range stale {
		if unreleased.Has(ref) {
			d.kept = append(d.kept, ref)
		}
	}
	setInventory(d.vr, d.kept)
	return nil
}

// tracked is what of desired the VidraResource tracks: an existing object Vidra does not
// manage is not its to track.
func tracked(desired []inventory.Ref, results []apply.Result) []inventory.Ref {
	untracked := inventory.Set{}
	for _, res := range results {
		if res.Action == apply.NotManaged || res.Action == apply.UsedAsItIs {
			untracked.Add(res.Ref)
		}
	}
	var kept []inventory.Ref
	for _, ref := range desired {
		if !untracked.Has(ref) {
			kept = append(kept, ref)
		}
	}
	return kept
}

func prunes(vr *vidrav1alpha1.VidraResource) bool {
	return vr.Spec.Prune == nil || *vr.Spec.Prune
}
