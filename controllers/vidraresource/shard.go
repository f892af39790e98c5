package vidraresource

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
)

// Shard tells whether this replica owns a cluster.
type Shard interface {
	Owns(ctx context.Context, name multicluster.ClusterName) bool
}

// owned reports whether this replica reconciles the VidraResource: it does when it owns
// the destination cluster. A destination that does not resolve is reported by the owner
// of the local cluster (the leader).
func (r *Reconciler) owned(ctx context.Context, vr *vidrav1alpha1.VidraResource) bool {
	if r.Shard == nil {
		return true
	}
	name, err := r.Resolver.Resolve(vr.Spec.Destination)
	if err != nil {
		name = destination.LocalCluster
	}
	return r.Shard.Owns(ctx, name)
}

// ClusterGained requeues the VidraResources of a cluster this replica has just come to own.
// They are read from the index of the hub's cache, without copies: the coordinator waits
// for this before it takes the next cluster's fence, and listing every VidraResource, a
// copy of each, for each of the 340 clusters a killed replica leaves, took a survivor a
// minute at 10,000 VidraResources.
func (r *Reconciler) ClusterGained(name multicluster.ClusterName) {
	ctx := context.Background()
	label := destination.Label(name)
	keys := []string{string(name)}
	if label != string(name) {
		keys = append(keys, label)
	}
	vrs, err := r.indexedUnder(ctx, keys...)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "list VidraResources of a cluster gained", "cluster", name)
	}
	for _, vr := range vrs {
		if vr.Status.Cluster == label || vr.Spec.Destination.Cluster == string(name) {
			r.Watches.Requeue(vr.Name)
		}
	}
}

// ClusterLost stops watching a cluster another replica now owns, and forgets the objects
// as this replica's applies left them there.
func (r *Reconciler) ClusterLost(name multicluster.ClusterName) {
	r.Watches.Forget(name)
	r.shared.Delete(name)
	r.forgetRevisions(destination.Label(name))
}

// RequeueAll requeues every VidraResource, as a newly elected leader does for those no
// other replica owns.
func (r *Reconciler) RequeueAll(ctx context.Context) {
	var list vidrav1alpha1.VidraResourceList
	// Only names are read: the cache's objects are not copied.
	if err := r.Hub.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "list VidraResources to requeue")
		return
	}
	for i := range list.Items {
		r.Watches.Requeue(list.Items[i].Name)
	}
}
