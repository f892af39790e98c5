package main

import (
	"context"
	"sync"
	"time"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// apiServerStops counts, for each control plane, the faults holding its API server
// down: the first stops it, the last undone starts it again. Each control plane has a
// lock of its own, so that one starting again holds up no fault of another.
type apiServerStops struct {
	mu    sync.Mutex
	of    map[*testfleet.Cluster]*apiServerStop
	stops []*testfleet.Cluster
}

type apiServerStop struct {
	mu    sync.Mutex
	count int
}

func (s *apiServerStops) get(c *testfleet.Cluster) *apiServerStop {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.of == nil {
		s.of = map[*testfleet.Cluster]*apiServerStop{}
	}
	if s.of[c] == nil {
		s.of[c] = &apiServerStop{}
		s.stops = append(s.stops, c)
	}
	return s.of[c]
}

func (s *apiServerStops) stop(c *testfleet.Cluster) error {
	st := s.get(c)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.count == 0 {
		if err := c.StopAPIServer(); err != nil {
			return err
		}
	}
	st.count++
	return nil
}

// start undoes one stop; the last starts the API server, trying again for a minute if
// it does not come up. Should it not, the count stays, for restore to try once more.
func (s *apiServerStops) start(ctx context.Context, c *testfleet.Cluster) error {
	st := s.get(c)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.count > 1 {
		st.count--
		return nil
	}
	err := testfleet.WaitFor(context.WithoutCancel(ctx), 2*time.Second, time.Minute, "the API server of "+c.Name+" started again", func() (bool, error) {
		return c.StartAPIServer() == nil, nil
	})
	if err == nil {
		st.count = 0
	}
	return err
}

// restore starts every API server still stopped.
func (s *apiServerStops) restore(ctx context.Context) error {
	s.mu.Lock()
	stopped := append([]*testfleet.Cluster(nil), s.stops...)
	s.mu.Unlock()
	for _, c := range stopped {
		st := s.get(c)
		st.mu.Lock()
		down := st.count > 0
		st.mu.Unlock()
		if down {
			if err := s.start(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// inject starts pf's fault.
func (f *faultsRun) inject(pf plannedFault) error {
	switch pf.Kind {
	case operatorKill:
		for i := range faultsReplicas {
			f.replicas.kill(i)
		}
	case replicaKill:
		f.replicas.kill(pf.Target)
	case memberStop:
		return f.stops.stop(f.clusters[pf.Target].member)
	case hubStop:
		return f.stops.stop(f.fleet.Hub)
	case partition:
		f.pushClusters()[pf.Target].front.cut()
	case sourceFault:
		f.sources.fail(faultedKinds[pf.Target])
	}
	return nil
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
