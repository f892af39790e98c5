package vidraresource

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// CachedOn is Cached, for the tests outside the package.
func (w *DriftWatches) CachedOn(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster, ref inventory.Ref) (*metav1.PartialObjectMetadata, bool) {
	return w.Cached(ctx, &target{name: name, cluster: cl}, ref)
}

// RequeuedOnGain is what ClusterGained requeues for the cluster, reading the hub's
// VidraResources with hub (a client of the operator's cache, with its index).
func RequeuedOnGain(hub client.Client, name multicluster.ClusterName) []string {
	r := &Reconciler{Hub: hub, Watches: NewDriftWatches(logr.Discard(), "")}
	r.ClusterGained(name)
	var names []string
	for {
		select {
		case e := <-r.Watches.events:
			names = append(names, e.Object.GetName())
		default:
			return names
		}
	}
}

// RequeuedOnListing starts watches of w's hub for the kind on the cluster, beside w's, as
// a VidraResource vr first using it does, and returns whom their first list requeued.
func (w *DriftWatches) RequeuedOnListing(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster, vr string, gvk schema.GroupVersionKind) []string {
	fresh := NewDriftWatches(logr.Discard(), w.hubID)
	fresh.Scope = w.Scope
	defer fresh.Forget(name)
	dest := &target{name: name, cluster: cl}
	fresh.Use(dest, vr, []schema.GroupVersionKind{gvk}, true)
	for !fresh.Synced(ctx, dest, vr, gvk) && ctx.Err() == nil {
	}
	// The list told its objects before the watch said it synced.
	var names []string
	for {
		select {
		case e := <-fresh.events:
			names = append(names, e.Object.GetName())
		default:
			return names
		}
	}
}
