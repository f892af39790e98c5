package vidraresource

import (
	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// slotFor takes one of the workers' slots of the VidraResource's destination cluster,
// so that a cluster whose API server or admission webhooks answer slowly cannot hold
// every worker. One whose destination names no cluster yet does no work there, and
// takes none. One turned away is requeued as soon as its cluster gives a slot back: a
// cluster of quick reconciles is held back by its share, not by a fixed wait.
func (r *Reconciler) slotFor(vr *vidrav1alpha1.VidraResource) (release func(), ok bool) {
	cluster, err := r.Resolver.Resolve(vr.Spec.Destination)
	if err != nil {
		return func() {}, true
	}
	if r.Watches == nil {
		return r.slots.Take(cluster, r.PerClusterReconciles)
	}
	name := vr.Name
	return r.slots.TakeOrWait(cluster, r.PerClusterReconciles, name, func() { r.Watches.Requeue(name) })
}
