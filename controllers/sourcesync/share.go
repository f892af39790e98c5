package sourcesync

import (
	"github.com/vidra-operator/vidra/internal/fairshare"
)

// slotFor takes one of the workers' slots of the server the sync's source names (a Git
// host, a registry, a Helm repository), so that a server that answers slowly, or not at
// all until the source timeout, holds no more than its share of the kind's workers. A
// suspended sync fetches nothing and takes none.
func (r *Reconciler) slotFor(obj Object) (release func(), ok bool) {
	if obj.Options().Suspend {
		return func() {}, true
	}
	return r.bySource.Take(fairshare.SourceKey(obj.SourceURL()), r.PerSourceSyncs)
}
