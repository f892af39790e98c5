// Package sharding splits the fleet across operator replicas: peer Leases, rendezvous
// hashing, one fence Lease per cluster, written only when the cluster changes hands. It
// answers the one question the controllers ask: does this replica reconcile cluster X now?
package sharding

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
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
// hash places the cluster, once this replica holds the cluster's fence (fence.go).
//
// It takes the place of multicluster-runtime's sharded coordinator (v0.24.1), whose
// fences are renewed one by one (a read and a write per cluster every renewal, under one
// lock that engagements wait on) and which started a cluster under another cluster's
// engagement context, so that disengaging one cluster stopped another.
type Coordinator struct {
	leases  client.Client
	peers   *peerRegistry
	self    string
	opts    Options
	elected <-chan struct{}
	log     logr.Logger
	// decide asks the decision loop for a pass now (buffered, one pending at most).
	decide chan struct{}

	mu     sync.Mutex
	awares []multicluster.Aware
	// engaged: clusters the provider engaged here, whether or not this replica owns them.
	engaged  map[multicluster.ClusterName]*engagement
	onGained []func(multicluster.ClusterName)
	onLost   []func(multicluster.ClusterName)
	// stopping is closed once the process stops: the Done of the context the
	// coordinator runs under, which the provider's runs under too.
	stopping <-chan struct{}
	// lapsesSeen are the peer Lease's lapses the decision loop has acted on.
	lapsesSeen int
	// inheritedReleased: the fences this peer ID held before this process started are
	// handed back (the decision loop's own, read and written by it alone).
	inheritedReleased bool
}

// engagement is a cluster as the provider engaged it.
type engagement struct {
	cluster cluster.Cluster
	// lifetime ends when the provider disengages the cluster.
	lifetime context.Context
	// run is the context the cluster's controllers run under here, nil when they do
	// not run here; stop ends it.
	run  context.Context
	stop context.CancelFunc
	// fenced: this replica took the cluster's fence and has not handed it back.
	fenced bool
	// retry is when taking the fence is tried again after it failed.
	retry time.Time
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
	decide := make(chan struct{}, 1)
	peers := newPeerRegistry(leases, opts.Namespace, sanitize.DNS1123(opts.PeerID), opts.LeaseDuration, decide, log.WithName("peers"))
	return &Coordinator{
		leases:  leases,
		peers:   peers,
		self:    peers.Self().ID,
		opts:    opts,
		elected: elected,
		log:     log,
		decide:  decide,
		engaged: map[multicluster.ClusterName]*engagement{},
	}, nil
}

var _ mcmanager.Coordinator = &Coordinator{}

// PeerID is this replica's identity in the Leases.
func (c *Coordinator) PeerID() string { return c.self }

// AddAware registers a component engaged for the clusters this replica owns.
func (c *Coordinator) AddAware(a multicluster.Aware) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.awares = append(c.awares, a)
}

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

// Engage records a cluster the provider engaged; the decision loop starts its
// controllers if it belongs here. A cluster engaged again replaces its engagement.
func (c *Coordinator) Engage(lifetime context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := lifetime.Err(); err != nil {
		return err
	}
	eng := &engagement{cluster: cl, lifetime: lifetime}
	c.mu.Lock()
	if previous := c.engaged[name]; previous != nil {
		eng.fenced = previous.fenced
		if previous.stop != nil {
			previous.stop()
			previous.run, previous.stop = nil, nil
		}
	}
	c.engaged[name] = eng
	c.mu.Unlock()
	context.AfterFunc(lifetime, func() { c.disengaged(name, eng) })
	c.wake()
	return nil
}

// disengaged forgets a cluster the provider let go, and hands its fence back.
func (c *Coordinator) disengaged(name multicluster.ClusterName, eng *engagement) {
	c.mu.Lock()
	current, fenced := c.engaged[name] == eng, eng.fenced
	if current {
		delete(c.engaged, name)
	}
	stopping := c.stopping
	c.mu.Unlock()
	if !current || !fenced || isClosed(stopping) {
		// A stopping process disengages every cluster at once: handing each fence back
		// would take longer than its grace period, and deleting its peer Lease (leave)
		// frees them all in one write.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.releaseFence(ctx, name, nil); err != nil {
		c.log.Error(err, "hand back a disengaged cluster's fence; peers take it once this replica is gone", "cluster", name)
	}
}

// isClosed reports whether ch is closed; a nil ch never is.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// wake asks the decision loop for a pass now.
func (c *Coordinator) wake() {
	select {
	case c.decide <- struct{}{}:
	default:
	}
}

// Runnable runs the coordinator: peer membership and the decision loop. On a clean stop
// it deletes this replica's peer Lease, which frees its fences: at once, or for one
// taken within the last Lease duration, once that has passed.
func (c *Coordinator) Runnable() manager.Runnable {
	return runnable(func(ctx context.Context) error {
		c.mu.Lock()
		c.stopping = ctx.Done()
		c.mu.Unlock()
		err := c.run(ctx)
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
// is owned while its controllers run here (its fence is held) and this replica's peer
// Lease is renewed: one unrenewed for two thirds of its duration owns nothing, even
// before the decision loop, which may be busy writing fences, stops its clusters. The
// local cluster, and a cluster this replica has not engaged (unreachable from here, or
// not enrolled), belong to the leader, unless another replica holds the cluster's fence.
func (c *Coordinator) Owns(ctx context.Context, name multicluster.ClusterName) bool {
	renewed, lapses := c.peers.Renewed(time.Now())
	c.mu.Lock()
	eng, engaged := c.engaged[name]
	running := engaged && eng.run != nil
	current := renewed && lapses == c.lapsesSeen
	c.mu.Unlock()
	owned := running && current
	switch {
	case running && !current:
		c.wake()
		return false
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
