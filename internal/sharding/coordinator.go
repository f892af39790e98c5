// Package sharding splits the fleet across operator replicas. It wraps
// multicluster-runtime's sharded coordinator (peer Leases, rendezvous hashing, one fence
// Lease per cluster), works around how that coordinator derives cluster contexts, and
// answers the one question the controllers ask: does this replica reconcile cluster X now?
package sharding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"
)

// Lease name prefixes, in Options.Namespace.
const (
	// PeerLeasePrefix names each replica's membership Lease: vidra-peer-<peer ID>.
	PeerLeasePrefix = "vidra-peer"
	// FenceLeasePrefix names each cluster's fence Lease: vidra-shard-<cluster>.
	FenceLeasePrefix = "vidra-shard"
)

// Options configure a Coordinator.
type Options struct {
	// PeerID names this replica among its peers (the Pod's name); it must be unique.
	PeerID string
	// Namespace holds the peer and fence Leases.
	Namespace string
	// LeaseDuration is how long a replica's peer Lease, and a cluster's fence, outlive
	// their holder's last renewal; both are renewed every third of it, so a killed
	// replica's clusters move within about this long. Zero: 15s.
	LeaseDuration time.Duration
	// Probe is how often ownership is recomputed from the live peers. Zero: 2s.
	Probe time.Duration
}

// Coordinator engages a cluster's controllers on exactly one replica at a time. It is a
// multicluster-runtime manager Coordinator: the cluster provider engages every cluster
// on every replica, and the coordinator starts the controllers only where the rendezvous
// hash places the cluster and the cluster's fence Lease is held.
type Coordinator struct {
	inner   *sharded.Coordinator
	leases  client.Client
	self    string
	opts    Options
	elected <-chan struct{}
	log     logr.Logger

	mu sync.Mutex
	// engaged: clusters the provider engaged here, whether or not this replica owns them.
	engaged map[multicluster.ClusterName]*engagement
	// owned: clusters whose controllers run here, by the context they run under.
	owned    map[multicluster.ClusterName]context.Context
	onGained []func(multicluster.ClusterName)
	onLost   []func(multicluster.ClusterName)
}

// engagement is a cluster as the provider engaged it.
type engagement struct {
	cluster cluster.Cluster
	// lifetime ends when the provider disengages the cluster.
	lifetime context.Context
}

// New returns a Coordinator whose Leases are read and written with leases (an uncached
// client: fences decide who writes, so they are never read from a cache). elected is
// closed once this replica leads: the leader reconciles what no fence covers (the local
// cluster, clusters no replica could engage).
func New(leases client.Client, elected <-chan struct{}, log logr.Logger, opts Options) (*Coordinator, error) {
	if opts.PeerID == "" || opts.Namespace == "" {
		return nil, errors.New("sharding needs a peer ID and a namespace")
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = 15 * time.Second
	}
	if opts.Probe == 0 {
		opts.Probe = 2 * time.Second
	}
	registry := newPeerRegistry(leases, opts.Namespace, sanitize.DNS1123(opts.PeerID), opts.LeaseDuration, log.WithName("peers"))
	c := &Coordinator{
		leases:  leases,
		self:    registry.Self().ID,
		opts:    opts,
		elected: elected,
		log:     log,
		engaged: map[multicluster.ClusterName]*engagement{},
		owned:   map[multicluster.ClusterName]context.Context{},
	}
	c.inner = sharded.New(leases, log,
		sharded.WithPeerRegistry(registry),
		sharded.WithSharder(Rendezvous{}),
		sharded.WithShardLease(opts.Namespace, FenceLeasePrefix),
		sharded.WithPerClusterLease(true),
		sharded.WithLeaseTimings(opts.LeaseDuration, opts.LeaseDuration/3, 750*time.Millisecond),
		sharded.WithSynchronizationIntervals(opts.Probe, 15*time.Second),
	)
	// First among the awares, so ownership is known before any controller starts.
	c.inner.AddAware(ownershipAware{c})
	return c, nil
}

var _ mcmanager.Coordinator = &Coordinator{}

// PeerID is this replica's identity in the Leases.
func (c *Coordinator) PeerID() string { return c.self }

// AddAware registers a component engaged for the clusters this replica owns.
func (c *Coordinator) AddAware(a multicluster.Aware) { c.inner.AddAware(a) }

// OnGained registers fn, called when this replica starts owning a cluster. Register
// before the manager starts.
func (c *Coordinator) OnGained(fn func(multicluster.ClusterName)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onGained = append(c.onGained, fn)
}

// OnLost registers fn, called when this replica stops owning a cluster (or the cluster
// is disengaged). Register before the manager starts.
func (c *Coordinator) OnLost(fn func(multicluster.ClusterName)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onLost = append(c.onLost, fn)
}

// Engage hands a cluster the provider engaged to the sharded coordinator. The context
// given to it is not the provider's: see disengaged.
func (c *Coordinator) Engage(lifetime context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	c.mu.Lock()
	eng := &engagement{cluster: cl, lifetime: lifetime}
	c.engaged[name] = eng
	c.mu.Unlock()
	context.AfterFunc(lifetime, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.engaged[name] == eng {
			delete(c.engaged, name)
		}
	})
	return c.engageInner(lifetime, name, cl)
}

// engageInner engages the cluster in the sharded coordinator under a context that ends,
// with a disengaged cause naming the cluster, when the cluster's lifetime does.
func (c *Coordinator) engageInner(lifetime context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(lifetime))
	context.AfterFunc(lifetime, func() { cancel(&disengaged{cluster: name}) })
	if err := c.inner.Engage(ctx, name, cl); err != nil {
		cancel(err)
		return fmt.Errorf("engage cluster %s in the sharded coordinator: %w", name, err)
	}
	return nil
}

// disengaged is the cause of an engagement context's end: its cluster was disengaged.
//
// The sharded coordinator (v0.24.1) recomputes ownership of every cluster right after
// one is engaged, under that cluster's engagement context, so a cluster started in that
// pass runs under a context derived from another cluster's: when that other cluster is
// disengaged, it stops too, while the coordinator still counts it as running. The cause
// tells the two apart, and a cluster stopped for another's sake is engaged again.
type disengaged struct{ cluster multicluster.ClusterName }

func (d *disengaged) Error() string { return fmt.Sprintf("cluster %s was disengaged", d.cluster) }

// ownershipAware records which clusters run here; the sharded coordinator engages it
// first, under the context the cluster's controllers run under.
type ownershipAware struct{ c *Coordinator }

func (a ownershipAware) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	c := a.c
	c.mu.Lock()
	c.owned[name] = ctx
	gained := slices.Clone(c.onGained)
	c.mu.Unlock()
	c.log.Info("cluster owned by this replica", "cluster", name, "peer", c.self)
	context.AfterFunc(ctx, func() { c.released(ctx, name) })
	for _, fn := range gained {
		fn(name)
	}
	return nil
}

// released forgets a cluster whose controllers stopped here and, when they stopped only
// because another cluster was disengaged, engages it again.
func (c *Coordinator) released(ctx context.Context, name multicluster.ClusterName) {
	c.mu.Lock()
	current := c.owned[name] == ctx
	if current {
		delete(c.owned, name)
	}
	eng := c.engaged[name]
	lost := slices.Clone(c.onLost)
	c.mu.Unlock()

	var cause *disengaged
	if !errors.As(context.Cause(ctx), &cause) || cause.cluster == name {
		c.log.Info("cluster no longer owned by this replica", "cluster", name, "peer", c.self)
		if current {
			for _, fn := range lost {
				fn(name)
			}
		}
		return
	}
	if eng == nil || eng.lifetime.Err() != nil {
		return
	}
	c.log.V(1).Info("engaging again a cluster stopped with another's engagement", "cluster", name, "other", cause.cluster)
	if err := c.engageInner(eng.lifetime, name, eng.cluster); err != nil {
		c.log.Error(err, "engage cluster again", "cluster", name)
	}
}

// Runnable runs the sharded coordinator: peer membership, fences and the decision loop.
// On a clean stop it deletes this replica's peer Lease, so the others take its clusters
// over without waiting for the Lease to expire.
func (c *Coordinator) Runnable() manager.Runnable {
	inner := c.inner.Runnable()
	return runnable(func(ctx context.Context) error {
		err := inner.Start(ctx)
		if ctx.Err() != nil {
			c.leave()
			return nil
		}
		return err
	})
}

// runnable runs on every replica, leader or not.
type runnable func(context.Context) error

func (r runnable) Start(ctx context.Context) error { return r(ctx) }
func (r runnable) NeedLeaderElection() bool        { return false }

func (c *Coordinator) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease := &coordinationv1.Lease{}
	lease.Namespace, lease.Name = c.opts.Namespace, PeerLeasePrefix+"-"+c.self
	if err := c.leases.Delete(ctx, lease); client.IgnoreNotFound(err) != nil {
		c.log.Error(err, "delete peer Lease; peers take over once it expires", "lease", lease.Name)
	}
}

// Owns reports whether this replica reconciles the cluster now. A cluster engaged here
// is owned while its controllers run here (its fence is held). The local cluster, and a
// cluster this replica has not engaged (unreachable from here, or not enrolled), belong
// to the leader, unless another replica holds the cluster's fence.
func (c *Coordinator) Owns(ctx context.Context, name multicluster.ClusterName) bool {
	c.mu.Lock()
	_, owned := c.owned[name]
	_, engaged := c.engaged[name]
	c.mu.Unlock()
	switch {
	case owned:
		return true
	case engaged, !c.isLeader():
		return false
	case name == mcmanager.LocalCluster:
		return true
	}
	held, err := c.fenceHeldByPeer(ctx, name)
	if err != nil {
		c.log.V(1).Info("cannot read a cluster's fence; leaving it to its holder", "cluster", name, "error", err.Error())
		return false
	}
	return !held
}

func (c *Coordinator) isLeader() bool {
	select {
	case <-c.elected:
		return true
	default:
		return false
	}
}

// fenceHeldByPeer reports whether another replica holds the cluster's fence.
func (c *Coordinator) fenceHeldByPeer(ctx context.Context, name multicluster.ClusterName) (bool, error) {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: c.opts.Namespace, Name: FenceLeasePrefix + "-" + sanitize.DNS1123(string(name))}
	if err := c.leases.Get(ctx, key, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get fence Lease %s: %w", key.Name, err)
	}
	return heldByPeer(lease, c.self, time.Now()), nil
}

// heldByPeer reports whether someone other than self holds the Lease and renewed it
// within its duration.
func heldByPeer(lease *coordinationv1.Lease, self string, now time.Time) bool {
	spec := lease.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity == "" || *spec.HolderIdentity == self {
		return false
	}
	if spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second))
}
