package sharding_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// stall holds a replica's Lease writes (its peer Lease's renewals, its fences) until
// released, as a hub too loaded to answer them would: the replica is alive, its
// requests are only slow.
type stall struct {
	mu      sync.Mutex
	held    chan struct{} // nil while writes go through
	release func()
}

func (s *stall) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := make(chan struct{})
	s.held, s.release = held, sync.OnceFunc(func() { close(held) })
}

func (s *stall) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release != nil {
		s.release()
	}
	s.held = nil
}

func (s *stall) wait(ctx context.Context, obj client.Object) {
	if _, lease := obj.(*coordinationv1.Lease); !lease {
		return
	}
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-ctx.Done():
		}
	}
}

func (s *stall) client(t *testing.T) client.Client {
	t.Helper()
	return hubClientWith(t, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			s.wait(ctx, obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			s.wait(ctx, obj)
			return c.Update(ctx, obj, opts...)
		},
	})
}

// ownedByBoth fails the test if a cluster of sixClusters is owned, and run, by both.
func ownedByBoth(t *testing.T, p pair) {
	t.Helper()
	for _, name := range sixClusters {
		if p.a.Owns(context.Background(), name) && p.runsA.runs(name) && p.b.Owns(context.Background(), name) && p.runsB.runs(name) {
			t.Fatalf("cluster %s is owned by both replicas", name)
		}
	}
}

// TestAReplicaStalledMidPassOwnsNothingOnceItsPeersMayTakeOver: a replica whose pass is
// held up writing a fence while its peer Lease goes unrenewed owns none of its clusters
// before its peer takes them over, though its pass never got to stop them; once its
// writes go through again it stops them all, and takes back only the fences its peer
// hands back, so no cluster is ever owned by both.
func TestAReplicaStalledMidPassOwnsNothingOnceItsPeersMayTakeOver(t *testing.T) {
	ns := namespace(t)
	var held stall
	p := splitPair(t, ns, held.client(t))
	t.Cleanup(held.stop)

	// A cluster placed on a, engaged while a's writes are held: a's pass waits on its fence.
	var extra multicluster.ClusterName
	for i := 7; extra == ""; i++ {
		if name := fmt.Sprintf("c%d", i); sharding.OwnerAmong(name, []string{"replica-a", "replica-b"}) == "replica-a" {
			extra = multicluster.ClusterName(name)
		}
	}
	held.start()
	lifetime, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	if err := p.a.Engage(lifetime, extra, nil); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for !runsEveryAlone(p) {
		ownedByBoth(t, p)
		if time.Now().After(deadline) {
			t.Fatal("b does not run every cluster 30s after a's writes were held")
		}
		time.Sleep(20 * time.Millisecond)
	}

	held.stop()
	testfleet.Eventually(t, 30*time.Second, "the clusters are split again, each fence held by its owner", func() (bool, error) {
		ownedByBoth(t, p)
		if ok, err := splitBetween(p.a, p.b, p.runsA, p.runsB); !ok {
			return false, err
		}
		for _, name := range sixClusters {
			want := sharding.OwnerAmong(string(name), []string{"replica-a", "replica-b"})
			if holder := fenceHolder(t, ns, name); holder != want {
				return false, fmt.Errorf("%s's fence is held by %q, want %s", name, holder, want)
			}
		}
		return true, nil
	})
}

// runsEveryAlone reports whether b owns and runs every one of sixClusters and a owns none.
func runsEveryAlone(p pair) bool {
	for _, name := range sixClusters {
		if !p.b.Owns(context.Background(), name) || !p.runsB.runs(name) || p.a.Owns(context.Background(), name) {
			return false
		}
	}
	return true
}
