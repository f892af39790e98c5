package sharding_test

import (
	"fmt"
	"testing"

	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"

	"github.com/vidra-operator/vidra/internal/fleet/sharding"
)

func peersNamed(ids ...string) []sharder.PeerInfo {
	var peers []sharder.PeerInfo
	for _, id := range ids {
		peers = append(peers, sharder.PeerInfo{ID: id, Weight: 1})
	}
	return peers
}

func shares(clusters []string, peers []sharder.PeerInfo) map[string]int {
	n := map[string]int{}
	for _, c := range clusters {
		n[sharding.Owner(c, peers)]++
	}
	return n
}

// TestRendezvousSharesAFleetEvenly: a thousand clusters over three replicas whose IDs
// differ only by their last character (which upstream's hash splits 25/25/50), or over
// pods of a Deployment, come out within 10% of an even share each.
func TestRendezvousSharesAFleetEvenly(t *testing.T) {
	var clusters []string
	for i := range 1000 {
		clusters = append(clusters, fmt.Sprintf("fleet-%04d", i))
	}
	for _, peers := range [][]sharder.PeerInfo{
		peersNamed("vidra-0", "vidra-1", "vidra-2"),
		peersNamed("vidra-7c9d5b8f4-x2lqp", "vidra-7c9d5b8f4-9zkfm", "vidra-7c9d5b8f4-hq6tn"),
	} {
		got := shares(clusters, peers)
		for _, p := range peers {
			if share := got[p.ID]; share < 300 || share > 367 {
				t.Errorf("%s holds %d of 1000 clusters, want 333 ± 10%% (shares %v)", p.ID, share, got)
			}
		}
	}
}

// TestRendezvousMovesOnlyAGoneReplicasClusters: when a replica goes, the clusters of the
// others stay where they were, and its own are shared among them; each cluster has one
// owner, whatever the order the peers are listed in.
func TestRendezvousMovesOnlyAGoneReplicasClusters(t *testing.T) {
	all := peersNamed("a", "b", "c")
	survivors := peersNamed("c", "a")
	moved := map[string]int{}
	for i := range 300 {
		cluster := fmt.Sprintf("site-%d", i)
		before, after := sharding.Owner(cluster, all), sharding.Owner(cluster, survivors)
		if before != "b" && before != after {
			t.Errorf("%s moved from %s to %s though %s stayed", cluster, before, after, before)
		}
		if before == "b" {
			moved[after]++
		}
		owners := 0
		for _, p := range all {
			if (sharding.Rendezvous{}).ShouldOwn(cluster, all, p) {
				owners++
			}
		}
		if owners != 1 {
			t.Errorf("%s has %d owners", cluster, owners)
		}
	}
	if moved["a"] == 0 || moved["c"] == 0 {
		t.Errorf("the gone replica's clusters went to %v, want shared by a and c", moved)
	}
}
