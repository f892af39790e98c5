package secret

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/runtime/ctrlqueue"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// SetupWithManager wires the provider into the hub's manager: one Secret cache per
// enrollment label, each restricted to the operator's namespace and to Secrets that carry
// the label (never all Secrets of the hub), and a controller that reconciles them.
func (p *Provider) SetupWithManager(mgr mcmanager.Manager) error {
	local := mgr.GetLocalManager()
	p.hub = local.GetClient()
	p.hubReader = local.GetAPIReader()
	recorder := local.GetEventRecorder("vidra-cluster-provider")
	p.enrollEvents, p.renewEvents = events.NewRecorder(recorder, "Enroll"), events.NewRecorder(recorder, "Renew")

	b := ctrl.NewControllerManagedBy(local).
		Named("cluster-provider").
		WithOptions(controller.Options{
			MaxConcurrentReconciles: p.opts.MaxConcurrentReconciles,
			NewQueue:                ctrlqueue.Requests(),
			// Sharded, every replica engages every cluster; the coordinator picks the
			// replica whose controllers run on it.
			NeedLeaderElection: ptr.To(p.opts.Shard == nil),
		})
	for _, label := range []string{vidrav1alpha1.ClusterLabel, vidrav1alpha1.LegacyClusterLabel} {
		c, err := p.newSecretCache(local.GetConfig(), local, label)
		if err != nil {
			return err
		}
		if err := local.Add(secretCache{Cache: c, leaderOnly: p.opts.Shard == nil}); err != nil {
			return fmt.Errorf("add Secret cache for label %s: %w", label, err)
		}
		p.secretCaches = append(p.secretCaches, c)
		b = b.WatchesRawSource(source.Kind(c, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{}))
	}
	leases, err := p.newLeaseCache(local)
	if err != nil {
		return err
	}
	if err := local.Add(secretCache{Cache: leases, leaderOnly: p.opts.Shard == nil}); err != nil {
		return fmt.Errorf("add heartbeat Lease cache: %w", err)
	}
	p.leases = leases
	b = b.WatchesRawSource(source.Kind(leases, &coordinationv1.Lease{}, handler.TypedEnqueueRequestsFromMapFunc(p.secretsOfLease)))
	// A VidraCluster deleted by hand is recreated, and one left behind by a Secret deleted
	// while the operator was down is removed: both go to the Secret it names.
	b = b.Watches(&vidrav1alpha1.VidraCluster{}, handler.EnqueueRequestsFromMapFunc(secretOfVidraCluster),
		builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}))
	b = b.WatchesRawSource(source.Channel(p.requeue, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{}))
	if err := b.Complete(p); err != nil {
		return fmt.Errorf("set up cluster provider controller: %w", err)
	}
	return nil
}

func (p *Provider) newSecretCache(cfg *rest.Config, local manager.Manager, label string) (cache.Cache, error) {
	hasLabel, err := labels.NewRequirement(label, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("selector for label %s: %w", label, err)
	}
	c, err := cache.New(cfg, cache.Options{
		HTTPClient:        local.GetHTTPClient(),
		Scheme:            local.GetScheme(),
		Mapper:            local.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{p.opts.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*hasLabel)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("build Secret cache for label %s: %w", label, err)
	}
	return c, nil
}

func secretOfVidraCluster(_ context.Context, obj client.Object) []reconcile.Request {
	vc, ok := obj.(*vidrav1alpha1.VidraCluster)
	if !ok || vc.Status.SecretRef == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: vc.Status.SecretRef.Namespace, Name: vc.Status.SecretRef.Name}}}
}

// secretCache runs a Secret cache on the leader only, or, sharded, on every replica:
// every replica engages every cluster.
type secretCache struct {
	cache.Cache
	leaderOnly bool
}

func (c secretCache) NeedLeaderElection() bool { return c.leaderOnly }

// newLeaseCache is a cache of the heartbeat Leases of pull clusters' agents, and of no
// other Lease.
func (p *Provider) newLeaseCache(local manager.Manager) (cache.Cache, error) {
	hasLabel, err := labels.NewRequirement(pull.ClusterLabel, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("selector for label %s: %w", pull.ClusterLabel, err)
	}
	c, err := cache.New(local.GetConfig(), cache.Options{
		HTTPClient: local.GetHTTPClient(),
		Scheme:     local.GetScheme(),
		Mapper:     local.GetRESTMapper(),
		ByObject:   map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {Label: labels.NewSelector().Add(*hasLabel)}},
	})
	if err != nil {
		return nil, fmt.Errorf("build heartbeat Lease cache: %w", err)
	}
	return c, nil
}

// secretsOfLease are the enrollment Secrets of the cluster whose agent's heartbeat the
// Lease is.
func (p *Provider) secretsOfLease(ctx context.Context, lease *coordinationv1.Lease) []reconcile.Request {
	cluster := lease.Labels[pull.ClusterLabel]
	if lease.Name != pull.AgentName || lease.Namespace != pull.Namespace(cluster) {
		return nil
	}
	var requests []reconcile.Request
	for _, c := range p.secretCaches {
		var list corev1.SecretList
		if err := c.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.ClusterLabel: cluster}); err != nil {
			continue
		}
		for _, s := range list.Items {
			requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return requests
}
