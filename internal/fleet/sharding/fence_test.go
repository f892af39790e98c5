package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const fenceTestLease = 3 * time.Second

var sixClusters = []multicluster.ClusterName{"c1", "c2", "c3", "c4", "c5", "c6"}

// outage makes a replica's client fail every request while it is on, as a replica cut
// off from the hub would see it.
type outage struct{ on atomic.Bool }

func (o *outage) client(t *testing.T) client.Client {
	t.Helper()
	cut := errors.New("the hub is out of reach")
	return hubClientWith(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if o.on.Load() {
				return cut
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if o.on.Load() {
				return cut
			}
			return c.List(ctx, list, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if o.on.Load() {
				return cut
			}
			return c.Update(ctx, obj, opts...)
		},
	})
}

// hubClientWith is a client of the hub whose requests pass through funcs.
func hubClientWith(t *testing.T, funcs interceptor.Funcs) client.Client {
	t.Helper()
	direct, err := client.NewWithWatch(hub.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(direct, funcs)
}

// replica runs a Coordinator named id, its Leases read and written with c, engaged for
// sixClusters until the test ends. stop ends it as a process ends: the coordinator's
// context first, then the provider's clusters.
func replica(t *testing.T, ns, id string, c client.Client) (coord *sharding.Coordinator, aware *running, stop func()) {
	t.Helper()
	aware = newRunning()
	coord, err := sharding.New(c, closed(), testLogger(t), sharding.Options{PeerID: id, Namespace: ns, LeaseDuration: fenceTestLease, Probe: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	coord.AddAware(aware)
	stopRunnable := startRunnable(t, coord.Runnable().Start)
	lifetime, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	for _, name := range sixClusters {
		if err := coord.Engage(lifetime, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	return coord, aware, func() { stopRunnable(); end() }
}

// fenceWrites counts the fence Leases a replica's client writes.
type fenceWrites struct{ n atomic.Int64 }

func (w *fenceWrites) client(t *testing.T) client.Client {
	t.Helper()
	count := func(obj client.Object) {
		if strings.HasPrefix(obj.GetName(), sharding.FenceLeasePrefix+"-") {
			w.n.Add(1)
		}
	}
	return hubClientWith(t, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count(obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count(obj)
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count(obj)
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// splitBetween reports whether every cluster runs on exactly one of a and b, and both
// have some.
func splitBetween(a, b *sharding.Coordinator, runsA, runsB *running) (bool, error) {
	onA := 0
	for _, name := range sixClusters {
		inA, inB := a.Owns(context.Background(), name) && runsA.runs(name), b.Owns(context.Background(), name) && runsB.runs(name)
		if inA == inB {
			return false, fmt.Errorf("cluster %s: runs on a %v, on b %v", name, inA, inB)
		}
		if inA {
			onA++
		}
	}
	return onA > 0 && onA < len(sixClusters), fmt.Errorf("a runs %d of %d", onA, len(sixClusters))
}

// pair is two replicas that have split sixClusters: a, which stop ends as a process
// ends, and b.
type pair struct {
	a, b         *sharding.Coordinator
	runsA, runsB *running
	stopA        func()
}

// splitPair runs replica-a, its Leases read and written with clientA, and replica-b, and
// waits until they have split sixClusters.
func splitPair(t *testing.T, ns string, clientA client.Client) pair {
	t.Helper()
	var p pair
	p.a, p.runsA, p.stopA = replica(t, ns, "replica-a", clientA)
	p.b, p.runsB, _ = replica(t, ns, "replica-b", hub.Client)
	testfleet.Eventually(t, 30*time.Second, "the clusters are split", func() (bool, error) {
		return splitBetween(p.a, p.b, p.runsA, p.runsB)
	})
	return p
}

// runsEvery reports whether the replica id runs every one of sixClusters, owns it and
// holds its fence.
func runsEvery(t *testing.T, ns, id string, coord *sharding.Coordinator, runs *running) (bool, error) {
	t.Helper()
	for _, name := range sixClusters {
		if !runs.runs(name) || !coord.Owns(context.Background(), name) || fenceHolder(t, ns, name) != id {
			return false, fmt.Errorf("%s does not run %s yet", id, name)
		}
	}
	return true, nil
}

// fenceVersions are the resourceVersions of the namespace's fence Leases.
func fenceVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	var leases coordinationv1.LeaseList
	if err := hub.Client.List(context.Background(), &leases, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, l := range leases.Items {
		versions[l.Name] = l.ResourceVersion
	}
	for _, name := range sixClusters {
		if versions[sharding.FenceName(name)] == "" {
			t.Fatalf("no fence for %s", name)
		}
	}
	return versions
}

// TestAnIdleFleetsFencesAreNotWritten: once the fleet is split, no fence is written again
// for three Lease durations, and every cluster stays where it runs: the peer Leases keep
// the fences held.
func TestAnIdleFleetsFencesAreNotWritten(t *testing.T) {
	ns := namespace(t)
	p := splitPair(t, ns, hub.Client)
	a, b, runsA, runsB := p.a, p.b, p.runsA, p.runsB
	before := fenceVersions(t, ns)
	time.Sleep(3 * fenceTestLease)
	if ok, err := splitBetween(a, b, runsA, runsB); !ok {
		t.Fatalf("after three Lease durations: %v", err)
	}
	after := fenceVersions(t, ns)
	for _, name := range sixClusters {
		if fence := sharding.FenceName(name); before[fence] != after[fence] {
			t.Errorf("fence %s written while idle: resourceVersion %s, then %s", fence, before[fence], after[fence])
		}
	}
	held, err := sharding.FenceHolders(context.Background(), hub.Client, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sixClusters {
		if want := map[bool]string{true: "replica-a", false: "replica-b"}[runsA.runs(name)]; held[sharding.FenceName(name)] != want {
			t.Errorf("FenceHolders says %s holds %s's fence, want %s", held[sharding.FenceName(name)], name, want)
		}
	}
}

// TestAReplicaCutOffStopsBeforeItsPeersTakeOver: a replica that cannot renew its peer
// Lease stops its clusters before the Lease expires; the other takes them over once it
// has, and no cluster ever runs on both.
func TestAReplicaCutOffStopsBeforeItsPeersTakeOver(t *testing.T) {
	ns := namespace(t)
	var cut outage
	p := splitPair(t, ns, cut.client(t))
	a, b, runsA, runsB := p.a, p.b, p.runsA, p.runsB
	cut.on.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		onB := 0
		for _, name := range sixClusters {
			if runsA.runs(name) && runsB.runs(name) {
				t.Fatalf("cluster %s runs on both replicas", name)
			}
			if runsB.runs(name) && b.Owns(context.Background(), name) {
				onB++
			}
		}
		if onB == len(sixClusters) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b runs %d of %d clusters 30s after a was cut off", onB, len(sixClusters))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range sixClusters {
		if a.Owns(context.Background(), name) || runsA.runs(name) {
			t.Errorf("a, cut off, still runs %s", name)
		}
		if holder := fenceHolder(t, ns, name); holder != "replica-b" {
			t.Errorf("%s's fence is held by %q, want replica-b", name, holder)
		}
	}
}

// TestAStoppingReplicaLeavesItsFencesToItsPeerLease: a replica whose process stops writes
// no fence as its clusters disengage (a thousand hand-backs would outlast its grace
// period); deleting its peer Lease frees them, and the other replica takes every cluster.
func TestAStoppingReplicaLeavesItsFencesToItsPeerLease(t *testing.T) {
	ns := namespace(t)
	var writes fenceWrites
	p := splitPair(t, ns, writes.client(t))
	taken := writes.n.Load()
	p.stopA()
	testfleet.Eventually(t, 30*time.Second, "b runs every cluster", func() (bool, error) {
		return runsEvery(t, ns, "replica-b", p.b, p.runsB)
	})
	if n := writes.n.Load() - taken; n != 0 {
		t.Errorf("a wrote %d fences while its process stopped, want none", n)
	}
}
