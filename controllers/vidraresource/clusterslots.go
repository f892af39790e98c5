package vidraresource

import (
	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// slotFor takes one of the workers' slots of the VidraResource's destination cluster,
// so that a cluster whose API server or admission webhooks answer slowly cannot hold
// every worker. One whose destination names no cluster yet does no work there, and
// takes none.
func (r *Reconciler) slotFor(vr *vidrav1alpha1.VidraResource) (release func(), ok bool) {
	cluster, err := r.Resolver.Resolve(vr.Spec.Destination)
	if err != nil {
		return func() {}, true
	}
	return r.slots.Take(cluster, r.PerClusterReconciles)
}
