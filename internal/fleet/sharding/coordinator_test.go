package sharding_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// hub holds the Leases; the coordinators under test only ever talk to it.
var hub *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) { hub = f.Hub }))
}

// running records the clusters an aware was engaged for, and whether each still runs.
type running struct {
	mu       sync.Mutex
	contexts map[multicluster.ClusterName]context.Context
	engages  map[multicluster.ClusterName]int
}

func newRunning() *running {
	return &running{contexts: map[multicluster.ClusterName]context.Context{}, engages: map[multicluster.ClusterName]int{}}
}

func (r *running) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.contexts[name] = ctx
	r.engages[name]++
	return nil
}

// runs reports whether the cluster's latest engagement is still live.
func (r *running) runs(name multicluster.ClusterName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx := r.contexts[name]
	return ctx != nil && ctx.Err() == nil
}

// namespace makes a namespace for one test's Leases.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharding-"}}
	if err := hub.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// holdFence makes another peer hold a cluster's fence for d.
func holdFence(t *testing.T, ns string, name multicluster.ClusterName, d time.Duration) {
	t.Helper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharding.FenceName(name)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("ghost"),
			LeaseDurationSeconds: ptr.To(int32(d / time.Second)),
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	if err := hub.Client.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
}

// startRunnable runs r until the test ends.
func startRunnable(t *testing.T, start func(context.Context) error) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = start(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// engageLateStarter engages b while a ghost holds its fence, then, once the ghost's fence
// has expired, engages a: the recompute that a's engagement triggers is the one that
// starts b. It returns a's lifetime's cancel.
func engageLateStarter(t *testing.T, ns string, engage func(context.Context, multicluster.ClusterName) error) context.CancelFunc {
	t.Helper()
	holdFence(t, ns, "b", 2*time.Second)
	lifetimeB, cancelB := context.WithCancel(context.Background())
	t.Cleanup(cancelB)
	if err := engage(lifetimeB, "b"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the ghost's fence expires; no probe runs in between
	lifetimeA, cancelA := context.WithCancel(context.Background())
	t.Cleanup(cancelA)
	if err := engage(lifetimeA, "a"); err != nil {
		t.Fatal(err)
	}
	return cancelA
}

// TestClusterKeepsRunningWhenAnotherIsDisengaged: b is started in the pass that a's
// engagement asks for; disengaging a leaves b running, with its fence. (Multicluster-
// runtime's sharded coordinator started b under a's engagement context, and stopped it
// with a.)
func TestClusterKeepsRunningWhenAnotherIsDisengaged(t *testing.T) {
	ns := namespace(t)
	aware := newRunning()
	coord, err := sharding.New(hub.Client, closed(), testLogger(t), sharding.Options{PeerID: "solo", Namespace: ns, Probe: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	coord.AddAware(aware)
	startRunnable(t, coord.Runnable().Start)

	engage := func(ctx context.Context, name multicluster.ClusterName) error { return coord.Engage(ctx, name, nil) }
	disengageA := engageLateStarter(t, ns, engage)
	testfleet.Eventually(t, 10*time.Second, "a and b run", func() (bool, error) {
		return aware.runs("a") && aware.runs("b"), nil
	})

	disengageA()
	testfleet.Eventually(t, 10*time.Second, "a stops and b runs again", func() (bool, error) {
		return !aware.runs("a") && aware.runs("b") && coord.Owns(context.Background(), "b"), nil
	})
	if fence := fenceHolder(t, ns, "b"); fence != "solo" {
		t.Fatalf("b's fence is held by %q, want solo", fence)
	}
}

// TestEachClusterHasOneOwnerAndAStoppedPeersClustersMove: two replicas split six
// clusters, each owned by exactly one of them; when one stops, the other takes all of
// them over, and when it comes back they are split again.
func TestEachClusterHasOneOwnerAndAStoppedPeersClustersMove(t *testing.T) {
	ns := namespace(t)
	names := sixClusters
	var lostMu sync.Mutex
	lost := map[string][]multicluster.ClusterName{}
	replica := func(id string) (*sharding.Coordinator, *running, context.CancelFunc) {
		aware := newRunning()
		coord, err := sharding.New(hub.Client, closed(), testLogger(t), sharding.Options{PeerID: id, Namespace: ns, LeaseDuration: 3 * time.Second, Probe: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		coord.AddAware(aware)
		coord.OnLost(func(name multicluster.ClusterName) {
			lostMu.Lock()
			defer lostMu.Unlock()
			lost[id] = append(lost[id], name)
		})
		stopRunnable := startRunnable(t, coord.Runnable().Start)
		// The provider's clusters end with the process, as they do here with stop.
		lifetime, endClusters := context.WithCancel(context.Background())
		t.Cleanup(endClusters)
		for _, name := range names {
			if err := coord.Engage(lifetime, name, nil); err != nil {
				t.Fatal(err)
			}
		}
		return coord, aware, func() { endClusters(); stopRunnable() }
	}
	a, runsA, stopA := replica("replica-a")
	b, runsB, _ := replica("replica-b")

	split := func() (bool, error) { return splitBetween(a, b, runsA, runsB) }
	testfleet.Eventually(t, 60*time.Second, "the clusters are split between both replicas", split)

	stopA()
	testfleet.Eventually(t, 30*time.Second, "b owns every cluster", func() (bool, error) {
		return runsEvery(t, ns, "replica-b", b, runsB)
	})

	lostMu.Lock()
	lost["replica-b"] = nil
	lostMu.Unlock()
	a, runsA, _ = replica("replica-a")
	testfleet.Eventually(t, 60*time.Second, "the clusters are split again", split)
	lostMu.Lock()
	defer lostMu.Unlock()
	for _, name := range lost["replica-b"] {
		if !a.Owns(context.Background(), name) {
			t.Errorf("b reported losing %s, which a does not own", name)
		}
	}
	if len(lost["replica-b"]) == 0 {
		t.Error("b handed clusters back without reporting them lost")
	}
}

// TestLeaderOwnsWhatNoFenceCovers: the local cluster and clusters this replica has not
// engaged belong to the leader, unless another replica holds the cluster's fence.
func TestLeaderOwnsWhatNoFenceCovers(t *testing.T) {
	ns := namespace(t)
	leader, err := sharding.New(hub.Client, closed(), testLogger(t), sharding.Options{PeerID: "leader", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	follower, err := sharding.New(hub.Client, make(chan struct{}), testLogger(t), sharding.Options{PeerID: "follower", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if !leader.Owns(ctx, mcmanager.LocalCluster) || follower.Owns(ctx, mcmanager.LocalCluster) {
		t.Fatal("the local cluster must belong to the leader alone")
	}
	if !leader.Owns(ctx, "unreached") || follower.Owns(ctx, "unreached") {
		t.Fatal("a cluster nobody engaged must belong to the leader alone")
	}
	holdFence(t, ns, "elsewhere", time.Minute)
	if leader.Owns(ctx, "elsewhere") {
		t.Fatal("the leader must leave a cluster whose fence another replica holds")
	}
}

func fenceHolder(t *testing.T, ns string, name multicluster.ClusterName) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: sharding.FenceName(name)}, lease); err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

func testLogger(t *testing.T) logr.Logger {
	t.Helper()
	log, err := testfleet.Logger()
	if err != nil {
		t.Fatal(err)
	}
	return log
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
