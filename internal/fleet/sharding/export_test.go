package sharding

import (
	"context"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// TakeFencesAsOnePass takes the fences of names one after the other, as one pass taking
// that many does, and says which it took.
func (c *Coordinator) TakeFencesAsOnePass(ctx context.Context, names []multicluster.ClusterName) (map[multicluster.ClusterName]bool, error) {
	listed := c.listFences(ctx, len(names), len(names))
	took := map[multicluster.ClusterName]bool{}
	for _, name := range names {
		ok, err := c.takeFence(ctx, name, listed)
		if err != nil {
			return nil, err
		}
		took[name] = ok
	}
	return took, nil
}

// ReleaseFencesAsOnePass hands back the fences of names, as one pass handing back that
// many does.
func (c *Coordinator) ReleaseFencesAsOnePass(ctx context.Context, names []multicluster.ClusterName) error {
	listed := c.listFences(ctx, len(names), len(names))
	for _, name := range names {
		if err := c.releaseFence(ctx, name, listed); err != nil {
			return err
		}
	}
	return nil
}
