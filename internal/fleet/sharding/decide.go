package sharding

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// fenceRetry is how long a cluster whose fence could not be taken waits before the next
// try: the passes in between (each engagement asks for one) leave it alone.
const fenceRetry = time.Second

// fenceWriters is how many fences a replica takes or hands back at once.
const fenceWriters = 8

// run renews and reads the peers and, every Probe and whenever the peers or the engaged
// clusters change, decides which clusters run here, until ctx ends.
func (c *Coordinator) run(ctx context.Context) error {
	membership := make(chan error, 1)
	go func() { membership <- c.peers.Run(ctx) }()
	// Deciding before the peers are known would take every cluster's fence, only to hand
	// most of them back a moment later.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-membership:
		return fmt.Errorf("peer membership: %w", err)
	case <-c.peers.Listed():
	}
	ticker := time.NewTicker(c.opts.Probe)
	defer ticker.Stop()
	for {
		c.pass(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-membership:
			return fmt.Errorf("peer membership: %w", err)
		case <-ticker.C:
		case <-c.decide:
		}
	}
}

// pass stops the clusters that no longer belong here, hands their fences back, and takes
// the fences of those that do and starts them.
func (c *Coordinator) pass(ctx context.Context) {
	if !c.inheritedReleased {
		if err := c.releaseInherited(ctx); err != nil {
			c.log.Error(err, "hand back the fences this replica's last process held; deciding once they are")
			return
		}
		c.inheritedReleased = true
	}
	now := time.Now()
	peers := c.peers.Snapshot()
	// Two thirds of its Lease's duration unrenewed, this replica may soon count as gone
	// to its peers, who then take its fences: it stops first. A lapse of a whole duration
	// that began and ended while the last pass was busy writing fences stops it too: its
	// peers may have taken fences meanwhile, so it takes each again before it runs the
	// cluster.
	renewed, lapses := c.peers.Renewed(now)
	c.mu.Lock()
	lapsed := lapses != c.lapsesSeen
	c.lapsesSeen = lapses
	alive := renewed && !lapsed
	var take, release []multicluster.ClusterName
	stopped := 0
	fleet := len(c.engaged)
	for name, eng := range c.engaged {
		want := alive && Owner(name.String(), peers) == c.self
		switch {
		case eng.run != nil && !want:
			eng.stop()
			eng.run, eng.stop = nil, nil
			stopped++
			if alive {
				eng.fenced = false
				release = append(release, name)
			}
		case eng.run == nil && !want && alive && eng.fenced:
			// Stopped while cut off from the hub, or engaged again, and placed elsewhere since.
			eng.fenced = false
			release = append(release, name)
		case eng.run == nil && want && !now.Before(eng.retry):
			take = append(take, name)
		}
	}
	c.mu.Unlock()
	if lapsed {
		c.wake() // to take the fences again
	}
	switch {
	case lapsed && stopped > 0:
		c.log.Error(nil, "peer Lease went unrenewed for its whole duration during a pass; stopped every cluster of this replica to take its fence again", "clusters", stopped)
	case !alive && stopped > 0:
		c.log.Error(nil, "peer Lease not renewed; stopped every cluster of this replica until it is", "clusters", stopped)
	}
	// A third of a thousand clusters changes hands at once when a replica comes or goes:
	// fences are written a few at a time, from one List of them.
	listed := c.listFences(ctx, len(take)+len(release), fleet)
	var writers errgroup.Group
	writers.SetLimit(fenceWriters)
	for _, name := range release {
		writers.Go(func() error {
			if err := c.releaseFence(ctx, name, listed); err != nil {
				c.log.Error(err, "hand back a cluster's fence; its new owner takes it once this replica is gone", "cluster", name)
			}
			return nil
		})
	}
	for _, name := range take {
		writers.Go(func() error {
			// Taking many fences takes a while: a peer seen meanwhile gets its share.
			if ctx.Err() == nil && Owner(name.String(), c.peers.Snapshot()) == c.self {
				c.start(ctx, name, listed)
			}
			return nil
		})
	}
	_ = writers.Wait()
}

// start takes the cluster's fence and, if this replica got it, starts its controllers.
func (c *Coordinator) start(ctx context.Context, name multicluster.ClusterName, listed listedFences) {
	took, err := c.takeFence(ctx, name, listed)
	if err != nil {
		c.log.Error(err, "take a cluster's fence; trying again", "cluster", name)
	}
	c.mu.Lock()
	eng := c.engaged[name]
	if eng == nil || eng.lifetime.Err() != nil || eng.run != nil {
		c.mu.Unlock()
		if took && (eng == nil || eng.lifetime.Err() != nil) {
			// Disengaged while its fence was being taken: no one else would hand it back.
			if err := c.releaseFence(ctx, name, nil); err != nil {
				c.log.Error(err, "hand back a disengaged cluster's fence; peers take it once this replica is gone", "cluster", name)
			}
		}
		return
	}
	if !took {
		// Held by a peer that has not handed it back yet, or not reached.
		eng.retry = time.Now().Add(fenceRetry)
		c.mu.Unlock()
		return
	}
	run, stop := context.WithCancel(eng.lifetime)
	eng.run, eng.stop, eng.fenced = run, stop, true
	awares, gained, lost := slices.Clone(c.awares), slices.Clone(c.onGained), slices.Clone(c.onLost)
	c.mu.Unlock()

	c.log.Info("cluster owned by this replica", "cluster", name, "peer", c.self)
	context.AfterFunc(run, func() { c.stopped(run, name, eng, lost) })
	for _, fn := range gained {
		fn(name)
	}
	go c.engageAwares(run, name, eng, awares)
}

// engageAwares starts the cluster's controllers; if one fails to start, the cluster is
// stopped and tried again after fenceRetry.
func (c *Coordinator) engageAwares(run context.Context, name multicluster.ClusterName, eng *engagement, awares []multicluster.Aware) {
	for _, a := range awares {
		if err := a.Engage(run, name, eng.cluster); err != nil {
			c.log.Error(err, "start a cluster's controllers; trying again", "cluster", name)
			c.mu.Lock()
			if eng.run == run {
				eng.stop()
				eng.retry = time.Now().Add(fenceRetry)
			}
			c.mu.Unlock()
			return
		}
	}
}

// stopped notes that the cluster's controllers no longer run here.
func (c *Coordinator) stopped(run context.Context, name multicluster.ClusterName, eng *engagement, lost []func(multicluster.ClusterName)) {
	c.mu.Lock()
	if eng.run == run {
		eng.run, eng.stop = nil, nil
	}
	c.mu.Unlock()
	c.log.Info("cluster no longer owned by this replica", "cluster", name, "peer", c.self)
	for _, fn := range lost {
		fn(name)
	}
}
