package sourcesync

import (
	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// slotFor takes one of the workers' slots of the server the sync's source names (a Git
// host, a registry, a Helm repository), and one of its requester's, so that a server
// that answers slowly, or not at all until the source timeout, and a tenant whose syncs
// point at several such servers, hold no more than their share of the kind's workers. A
// suspended sync fetches nothing and takes none.
func (r *Reconciler) slotFor(obj Object) (release func(), ok bool) {
	if obj.Options().Suspend {
		return func() {}, true
	}
	return r.share.Take(obj.SourceURL(), r.PerSourceSyncs, obj.GetAnnotations()[vidrav1alpha1.RequestedByAnnotation], r.PerRequesterSyncs)
}
