package operator

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/runtime/intern"
	"github.com/vidra-operator/vidra/providers/secret"
)

// newClusterProvider returns the Secret-based cluster provider, or nil in standalone mode,
// where no Secret is ever read. A nil one must not reach an interface (the manager's
// provider, the resolver's fleet) as a non-nil value: its users check for nil first.
func newClusterProvider(opts Options, scheme *runtime.Scheme, shard *sharding.Coordinator, hubID string) (*secret.Provider, error) {
	if opts.ClusterProvider == ProviderNone {
		return nil, nil
	}
	var owner secret.Shard
	if shard != nil {
		owner = shard
	}
	return secret.New(opts.Logger.WithName("cluster-provider"), secret.Options{
		Shard:             owner,
		Namespace:         opts.ClusterSecretNamespace,
		Policy:            opts.KubeconfigPolicy,
		QPS:               float32(opts.ClusterQPS),
		Burst:             opts.ClusterBurst,
		RateLimiter:       opts.ClusterRateLimiter,
		SyncTimeout:       opts.ClusterSyncTimeout,
		ProbeInterval:     opts.ClusterProbeInterval,
		ProbeTimeout:      opts.ClusterProbeTimeout,
		TokenRenewalPoint: opts.TokenRenewalPoint,
		HubID:             hubID,
		Version:           opts.Version,
		AgentTimeout:      opts.AgentTimeout,
		Scheme:            scheme,
		Metrics:           opts.Metrics,
		// Member caches hold only what Vidra manages, so memory follows Vidra's objects
		// rather than the size of each cluster; of their metadata, not the managed fields'
		// field by field lists, which no reader needs.
		Cache: cache.Options{DefaultLabelSelector: ownership.ManagedSelector(), DefaultTransform: apply.TrimCached},
	})
}

// newShard returns the coordinator that splits the fleet across replicas, or nil when
// sharding is off (then multicluster-runtime's basic coordinator engages every cluster).
func newShard(cfg *rest.Config, scheme *runtime.Scheme, elected <-chan struct{}, opts Options) (*sharding.Coordinator, error) {
	if !opts.Sharding {
		return nil, nil
	}
	// Fences decide who writes to a cluster: they are read from the API server, never a cache.
	leases, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client for shard Leases: %w", err)
	}
	shard, err := sharding.New(leases, elected, opts.Logger.WithName("sharding"), sharding.Options{
		PeerID:        opts.ShardID,
		Namespace:     opts.LeaderElectionNamespace,
		LeaseDuration: opts.ShardLeaseDuration,
	})
	if err != nil {
		return nil, fmt.Errorf("sharding: %w", err)
	}
	return shard, nil
}

// withFleet makes the hub's manager multi-cluster. Sharded, the provider runs on every
// replica, not only the leader as multicluster-runtime would run it: every replica
// engages every cluster, and the coordinator starts the controllers on the cluster's owner.
func withFleet(local manager.Manager, provider *secret.Provider, shard *sharding.Coordinator) (mcmanager.Manager, error) {
	if provider == nil {
		return mcmanager.WithMultiCluster(local, nil)
	}
	if shard == nil {
		return mcmanager.WithMultiCluster(local, provider)
	}
	mgr, err := mcmanager.WithMultiCluster(local, unstartedProvider{provider}, mcmanager.WithCoordinator(shard))
	if err != nil {
		return nil, err
	}
	shard.OnGained(provider.ClusterGained)
	if err := local.Add(everyReplica(func(ctx context.Context) error { return provider.Start(ctx, mgr) })); err != nil {
		return nil, fmt.Errorf("add cluster provider: %w", err)
	}
	return mgr, nil
}

// unstartedProvider hides the provider's Start from the manager, which would run it on
// the leader only.
type unstartedProvider struct{ multicluster.Provider }

// everyReplica is a runnable that runs whether or not this replica leads.
type everyReplica func(context.Context) error

func (r everyReplica) Start(ctx context.Context) error { return r(ctx) }
func (r everyReplica) NeedLeaderElection() bool        { return false }

// shardID is this replica's peer ID, or empty when not sharded.
func shardID(shard *sharding.Coordinator) string {
	if shard == nil {
		return ""
	}
	return shard.PeerID()
}

// internedStrings bounds the strings the hub's cache of VidraResources shares between
// them: about 1 MiB at most.
const internedStrings = 1 << 14

// cacheOptions are the cache options of the operator's own cluster: the hub's, or an
// agent's member, whose cache an identity narrowed to namespaces narrows too: the agent
// may read only where it may deliver (its own namespace's content and history are read
// from the API server, not a cache).
func cacheOptions(opts Options, cfg *rest.Config) cache.Options {
	c := hubCacheOptions(opts.Logger, cfg)
	// Nothing reads the managed fields of what the hub caches (its VidraResources' list
	// every field of their status); standalone, the drift watches are this cache's, and
	// keep of them who wrote what they watch.
	c.DefaultTransform = apply.TrimCached
	if c.ByObject == nil {
		c.ByObject = map[client.Object]cache.ByObject{}
	}
	c.ByObject[&vidrav1alpha1.VidraResource{}] = cache.ByObject{Transform: vidraresource.CompactCached(intern.NewTable(internedStrings))}
	if opts.agent == nil {
		// A sync keeps when its record of who asked was written, which the admission
		// guards read (admissionguard.RecordRefusal). Not in an agent, which reads no
		// sync, on a member that need not serve their kinds (a kind the cache is told of
		// must be served, or the cache does not start).
		for _, k := range vidrav1alpha1.SyncKinds() {
			c.ByObject[k.New()] = cache.ByObject{Transform: keepWrittenAt}
		}
	}
	if opts.agent == nil || opts.agent.Namespaces == nil {
		return c
	}
	c.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range opts.agent.Namespaces {
		c.DefaultNamespaces[ns] = cache.Config{}
	}
	return c
}

// hubCacheOptions has the hub's cache hold only the VirtualMachines Vidra manages, as
// member caches do, when the hub serves them: naming a kind the hub does not serve would
// stop the manager from starting.
func hubCacheOptions(log logr.Logger, cfg *rest.Config) cache.Options {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return cache.Options{}
	}
	if _, err := dc.ServerResourcesForGroupVersion(kubevirtv1.GroupVersion.String()); err != nil {
		log.V(1).Info("the hub serves no KubeVirt VirtualMachines", "reason", err.Error())
		return cache.Options{}
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{&kubevirtv1.VirtualMachine{}: {Label: ownership.ManagedSelector()}}}
}

// keepWrittenAt drops an object's managed fields but when its record of who asked was
// written.
func keepWrittenAt(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		admissionguard.KeepWrittenAt(o)
	}
	return obj, nil
}
