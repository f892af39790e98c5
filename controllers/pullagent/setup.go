package pullagent

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/ctrlqueue"
)

// Runner runs the Reconciler once the hub's cache of the cluster's bundles has synced,
// which may be long after the agent started (the hub may be down): the member's own
// controllers keep every copy applied meanwhile, and nothing waits for the hub.
type Runner struct {
	Reconciler *Reconciler
	// HubCache holds the cluster's namespace on the hub; the Runner starts it.
	HubCache cache.Cache
	// MemberCache holds the member's VidraResources (the manager's cache, started by it).
	MemberCache cache.Cache
	// MaxConcurrentReconciles bounds the bundles handled at once.
	MaxConcurrentReconciles int
	Log                     logr.Logger
}

// retryCap bounds the wait between failed attempts at a bundle: once the hub is back,
// the statuses it missed catch up within it.
const retryCap = 30 * time.Second

// Start runs until ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	go func() {
		if err := r.HubCache.Start(ctx); err != nil {
			r.Log.Error(err, "the hub's cache of the cluster's bundles stopped")
		}
	}()
	if _, err := r.HubCache.GetInformer(ctx, &vidrav1alpha1.VidraBundle{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watch the cluster's bundles on the hub: %w", err)
	}
	r.Log.Info("waiting for the hub's bundles", "hubNamespace", r.Reconciler.Namespace)
	if !r.HubCache.WaitForCacheSync(ctx) {
		return nil // stopped before the hub answered
	}
	r.Log.Info("the hub's bundles are synced", "hubNamespace", r.Reconciler.Namespace)
	c, err := controller.NewTypedUnmanaged("pullagent", controller.TypedOptions[reconcile.Request]{
		Reconciler:              r.Reconciler,
		MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1),
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, retryCap),
		NewQueue:                ctrlqueue.Requests(),
		SkipNameValidation:      ptr.To(true),
		Logger:                  r.Log,
	})
	if err != nil {
		return fmt.Errorf("build the agent's controller: %w", err)
	}
	byName := func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: obj.GetName()}}}
	}
	if err := c.Watch(source.Kind(r.HubCache, client.Object(&vidrav1alpha1.VidraBundle{}), handler.EnqueueRequestsFromMapFunc(byName))); err != nil {
		return fmt.Errorf("watch bundles: %w", err)
	}
	copies := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetLabels()[vidrav1alpha1.PulledFromLabel] == r.Reconciler.Cluster
	})
	if err := c.Watch(source.Kind(r.MemberCache, client.Object(&vidrav1alpha1.VidraResource{}), handler.EnqueueRequestsFromMapFunc(byName), copies)); err != nil {
		return fmt.Errorf("watch copies: %w", err)
	}
	return c.Start(ctx)
}
