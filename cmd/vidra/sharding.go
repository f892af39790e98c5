package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/sharding"
)

// newShard returns the coordinator that splits the fleet across replicas, or nil when
// --sharding is off (then multicluster-runtime's basic coordinator engages every cluster).
func newShard(log logr.Logger, cfg *rest.Config, scheme *runtime.Scheme, elected <-chan struct{}, opts options) (*sharding.Coordinator, error) {
	if !opts.sharding {
		return nil, nil
	}
	// Fences decide who writes to a cluster: they are read from the API server, never a cache.
	leases, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client for shard Leases: %w", err)
	}
	shard, err := sharding.New(leases, elected, log.WithName("sharding"), sharding.Options{
		PeerID:        opts.shardID,
		Namespace:     opts.leaderElectionNamespace,
		LeaseDuration: opts.shardLeaseDuration,
	})
	if err != nil {
		return nil, fmt.Errorf("sharding: %w", err)
	}
	return shard, nil
}

// withFleet makes the hub's manager multi-cluster. Sharded, the provider runs on every
// replica, not only the leader as multicluster-runtime would run it: every replica
// engages every cluster, and the coordinator starts the controllers on the cluster's owner.
func withFleet(local manager.Manager, provider clusterProvider, shard *sharding.Coordinator) (mcmanager.Manager, error) {
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
