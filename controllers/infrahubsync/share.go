package infrahubsync

import (
	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fairshare"
)

// takeSlot takes one of the workers' slots of the sync's Infrahub (scheme, host and
// port), so that an Infrahub that answers slowly holds no more than its share of the
// workers; a sync turned away is woken when the Infrahub gives one back.
func (r *Reconciler) takeSlot(ihs *vidrav1alpha1.InfrahubSync) (release func(), ok bool) {
	key := fairshare.SourceKey(ihs.Spec.Source.InfrahubAPIURL)
	if r.wakes == nil {
		return r.bySource.Take(key, r.PerSourceSyncs)
	}
	return r.bySource.TakeOrWait(key, r.PerSourceSyncs, ihs.Name, r.wakes.Wake(ihs.Name))
}
