package sharding_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestARestartedReplicaHandsBackWhatItsLastProcessHeld: a replica killed (SIGKILL)
// leaves its peer Lease and its fences behind; started again under the same peer ID, it
// hands back the fence of a cluster now placed on its peer, so the peer runs it, and
// runs the one still placed on it. Before, it kept such a fence without knowing it held
// it, and its live peer Lease kept the peer from taking it: the cluster ran nowhere (the
// faults bench found it, seed 4480085956627640177).
func TestARestartedReplicaHandsBackWhatItsLastProcessHeld(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	ids := []string{"replica-a", "replica-b"}
	onA, onB := placedOn(ids, "replica-a"), placedOn(ids, "replica-b")

	// What the killed process of replica-a left: its peer Lease, still live, and the
	// fences of both clusters, taken while it ran alone.
	killed := []client.Object{lease(ns, sharding.PeerLeasePrefix+"-replica-a", map[string]string{"vidra.infrahub.operators.com/shard-peer": "true"})}
	for _, name := range []multicluster.ClusterName{onA, onB} {
		killed = append(killed, lease(ns, sharding.FenceName(name), nil))
	}
	for _, obj := range killed {
		if err := hub.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	replica := func(id string) *running {
		aware := newRunning()
		coord, err := sharding.New(hub.Client, closed(), testLogger(t), sharding.Options{PeerID: id, Namespace: ns, LeaseDuration: 3 * time.Second, Probe: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		coord.AddAware(aware)
		startRunnable(t, coord.Runnable().Start)
		lifetime, end := context.WithCancel(ctx)
		t.Cleanup(end)
		for _, name := range []multicluster.ClusterName{onA, onB} {
			if err := coord.Engage(lifetime, name, nil); err != nil {
				t.Fatal(err)
			}
		}
		return aware
	}
	// The peer runs first, so that it sees replica-a's Lease live and leaves the fence
	// alone, as a peer does while a replica's process restarts.
	runsB := replica("replica-b")
	testfleet.Eventually(t, 10*time.Second, "replica-b's peer Lease", func() (bool, error) {
		err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharding.PeerLeasePrefix + "-replica-b"}, &coordinationv1.Lease{})
		return err == nil, client.IgnoreNotFound(err)
	})

	runsA := replica("replica-a")
	testfleet.Eventually(t, 30*time.Second, "each cluster runs where it is placed", func() (bool, error) {
		return runsA.runs(onA) && runsB.runs(onB) && !runsA.runs(onB) && !runsB.runs(onA), nil
	})
	if holder := fenceHolder(t, ns, onB); holder != "replica-b" {
		t.Fatalf("%s's fence is held by %q, want replica-b", onB, holder)
	}
}

// placedOn is the first cluster c0, c1, … that rendezvous hashing places on id.
func placedOn(ids []string, id string) multicluster.ClusterName {
	for i := 0; ; i++ {
		if name := fmt.Sprintf("c%d", i); sharding.OwnerAmong(name, ids) == id {
			return multicluster.ClusterName(name)
		}
	}
}

// lease is a Lease that replica-a renewed a moment ago, for 30 seconds.
func lease(ns, name string, labels map[string]string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("replica-a"),
			LeaseDurationSeconds: ptr.To(int32(30)),
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
}
