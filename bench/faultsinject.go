package main

import (
	"context"
	"sync"
	"time"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// apiServerStops counts, for each control plane, the faults holding its API server
// down: the first stops it, the last undone starts it again.
type apiServerStops struct {
	mu    sync.Mutex
	count map[*testfleet.Cluster]int
}

func (s *apiServerStops) stop(c *testfleet.Cluster) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count == nil {
		s.count = map[*testfleet.Cluster]int{}
	}
	s.count[c]++
	if s.count[c] > 1 {
		return nil
	}
	return c.StopAPIServer()
}

// start undoes one stop; the last starts the API server, trying again for a minute if
// it does not come up (its port may linger a moment).
func (s *apiServerStops) start(ctx context.Context, c *testfleet.Cluster) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count[c]--
	if s.count[c] > 0 {
		return nil
	}
	return testfleet.WaitFor(context.WithoutCancel(ctx), 2*time.Second, time.Minute, "the API server of "+c.Name+" started again", func() (bool, error) {
		return c.StartAPIServer() == nil, nil
	})
}

// inject starts pf's fault.
func (f *faultsRun) inject(pf plannedFault) {
	var err error
	switch pf.Kind {
	case operatorKill:
		for i := range faultsReplicas {
			f.replicas.kill(i)
		}
	case replicaKill:
		f.replicas.kill(pf.Target)
	case memberStop:
		err = f.stops.stop(f.clusters[pf.Target].member)
	case hubStop:
		err = f.stops.stop(f.fleet.Hub)
	case partition:
		f.pushClusters()[pf.Target].front.cut()
	case sourceFault:
		f.sources.fail(faultedKinds[pf.Target])
	}
	if err != nil {
		f.history.record("inject %s: %v", pf, err)
	}
}

// undo ends pf's fault.
func (f *faultsRun) undo(ctx context.Context, pf plannedFault) {
	var err error
	switch pf.Kind {
	case operatorKill:
		for i := range faultsReplicas {
			if e := f.replicas.revive(i); e != nil {
				err = e
			}
		}
	case replicaKill:
		err = f.replicas.revive(pf.Target)
	case memberStop:
		err = f.stops.start(ctx, f.clusters[pf.Target].member)
	case hubStop:
		err = f.stops.start(ctx, f.fleet.Hub)
	case partition:
		f.pushClusters()[pf.Target].front.heal()
	case sourceFault:
		f.sources.recover(faultedKinds[pf.Target])
	}
	if err != nil {
		f.history.record("undo %s: %v", pf, err)
	}
}

// pushClusters are the clusters with a front.
func (f *faultsRun) pushClusters() []faultsCluster {
	var out []faultsCluster
	for _, c := range f.clusters {
		if c.front != nil {
			out = append(out, c)
		}
	}
	return out
}

// targets are what the schedule chooses from.
func (f *faultsRun) targets() faultTargets {
	return faultTargets{replicas: faultsReplicas, clusters: len(f.clusters), fronts: len(f.pushClusters()), sources: len(faultedKinds)}
}
