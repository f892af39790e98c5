package operator

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// addPullContentCollector deletes, in each pull cluster's namespace on the hub, the
// content that no bundle there names any more, as the content collector does in the
// operator's own namespace.
func addPullContentCollector(mgr manager.Manager, opts Options) error {
	cache := mgr.GetClient()
	c := &content.NamespacesCollector{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Namespaces: func(ctx context.Context) ([]string, error) { return pullNamespaces(ctx, cache) },
		InUse: func(ns string) func(context.Context) (map[string]bool, error) {
			return content.NamedByBundles(cache, ns)
		},
		Grace:    opts.ContentGracePeriod,
		Interval: max(opts.ContentGracePeriod/4, time.Second),
		Log:      opts.Logger.WithName("pull-content"),
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("add the collector of pull clusters' content: %w", err)
	}
	return nil
}

// pullNamespaces are the namespaces of the pull clusters on the hub.
func pullNamespaces(ctx context.Context, hub client.Reader) ([]string, error) {
	var clusters vidrav1alpha1.VidraClusterList
	if err := hub.List(ctx, &clusters); err != nil {
		return nil, fmt.Errorf("list VidraClusters: %w", err)
	}
	var out []string
	for _, vc := range clusters.Items {
		if vc.Status.Mode == vidrav1alpha1.ClusterModePull {
			out = append(out, pull.Namespace(vc.Name))
		}
	}
	return out, nil
}
