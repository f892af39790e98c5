package vidraresource

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// byClusterField indexes the hub's cached VidraResources by the clusters a change of a
// VidraCluster concerns: the cluster each names and the one each resolved to, or
// unresolvedServer for one naming a server URL that no cluster answered to yet. Listing
// them all instead, for each of a thousand VidraClusters the cache adds at start-up,
// copied 10,000 VidraResources a thousand times: the cache did not sync in time.
const byClusterField = "vidra.destinationCluster"

// unresolvedServer is the index key of the VidraResources that name a server URL that
// no cluster answered to yet: any cluster may be the one.
const unresolvedServer = "\x00unresolved-server"

func clustersOf(obj client.Object) []string {
	vr, ok := obj.(*vidrav1alpha1.VidraResource)
	if !ok {
		return nil
	}
	var keys []string
	if c := vr.Spec.Destination.Cluster; c != "" {
		keys = append(keys, c)
	}
	if c := vr.Status.Cluster; c != "" && c != vr.Spec.Destination.Cluster {
		keys = append(keys, c)
	}
	if vr.Spec.Destination.Server != "" && vr.Status.Cluster == "" {
		keys = append(keys, unresolvedServer)
	}
	return keys
}

// indexByCluster registers byClusterField with the hub's cache.
func indexByCluster(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &vidrav1alpha1.VidraResource{}, byClusterField, clustersOf); err != nil {
		return fmt.Errorf("index VidraResources by cluster: %w", err)
	}
	return nil
}

// resourcesOfCluster requeues the VidraResources that wait for, or deliver to, a cluster.
func (r *Reconciler) resourcesOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	vrs, _ := r.indexedUnder(ctx, obj.GetName(), unresolvedServer)
	requests := make([]reconcile.Request, 0, len(vrs))
	for _, vr := range vrs {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(vr)})
	}
	return requests
}

// indexedUnder are the hub's cached VidraResources filed under any of keys in
// byClusterField, each once. They are the cache's own objects, not copies: read them,
// never change them. On an error, those listed before it are returned with it.
func (r *Reconciler) indexedUnder(ctx context.Context, keys ...string) ([]*vidrav1alpha1.VidraResource, error) {
	var vrs []*vidrav1alpha1.VidraResource
	seen := map[string]bool{}
	for _, key := range keys {
		var list vidrav1alpha1.VidraResourceList
		if err := r.Hub.List(ctx, &list, client.MatchingFields{byClusterField: key}, client.UnsafeDisableDeepCopy); err != nil {
			return vrs, fmt.Errorf("list VidraResources of cluster %q: %w", key, err)
		}
		for i := range list.Items {
			if vr := &list.Items[i]; !seen[vr.Name] {
				seen[vr.Name] = true
				vrs = append(vrs, vr)
			}
		}
	}
	return vrs, nil
}
