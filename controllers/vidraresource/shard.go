package vidraresource

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/destination"
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
func (r *Reconciler) ClusterGained(name multicluster.ClusterName) {
	label := destination.Label(name)
	r.requeueWhere(context.Background(), func(vr *vidrav1alpha1.VidraResource) bool {
		return vr.Status.Cluster == label || vr.Spec.Destination.Cluster == string(name)
	})
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
	r.requeueWhere(ctx, func(*vidrav1alpha1.VidraResource) bool { return true })
}

func (r *Reconciler) requeueWhere(ctx context.Context, match func(*vidrav1alpha1.VidraResource) bool) {
	var list vidrav1alpha1.VidraResourceList
	if err := r.Hub.List(ctx, &list); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "list VidraResources to requeue")
		return
	}
	for i := range list.Items {
		if match(&list.Items[i]) {
			r.Watches.Requeue(list.Items[i].Name)
		}
	}
}
