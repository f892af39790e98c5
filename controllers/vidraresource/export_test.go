package vidraresource

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/inventory"
)

// CachedOn is Cached, for the tests outside the package.
func (w *DriftWatches) CachedOn(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster, ref inventory.Ref) (*metav1.PartialObjectMetadata, bool) {
	return w.Cached(ctx, &target{name: name, cluster: cl}, ref)
}
