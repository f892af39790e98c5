package sharding

import (
	"hash/fnv"

	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
)

// Rendezvous places each cluster on the peer that scores highest for it, as upstream's
// HRW does, so that a peer coming or going moves only its own share. Upstream scores a
// cluster by the FNV-1a hash of "cluster|peer", whose last bytes barely move the result:
// peers whose IDs differ by a suffix (pod names, replica numbers) get uneven shares (25,
// 25 and 50 of 100 clusters over three). Here the hash is mixed further (SplitMix64's
// finalizer), so every bit of the peer's ID moves the score.
type Rendezvous struct{}

var _ sharder.Sharder = Rendezvous{}

// ShouldOwn says whether self is the peer the cluster is placed on.
func (Rendezvous) ShouldOwn(clusterID string, peers []sharder.PeerInfo, self sharder.PeerInfo) bool {
	if len(peers) == 0 {
		return true
	}
	return Owner(clusterID, peers) == self.ID
}

// Owner is the ID of the peer the cluster is placed on ("" with no peers); a tie, which
// the hash makes unlikely, goes to the lowest ID, whatever the peers' order.
func Owner(cluster string, peers []sharder.PeerInfo) string {
	var best string
	var bestScore uint64
	for _, p := range peers {
		score := score(cluster, p.ID) * uint64(max(p.Weight, 1))
		if best == "" || score > bestScore || (score == bestScore && p.ID < best) {
			best, bestScore = p.ID, score
		}
	}
	return best
}

// OwnerAmong is the ID of the peer the cluster is placed on among peers of equal weight.
func OwnerAmong(cluster string, ids []string) string {
	peers := make([]sharder.PeerInfo, len(ids))
	for i, id := range ids {
		peers[i] = sharder.PeerInfo{ID: id, Weight: 1}
	}
	return Owner(cluster, peers)
}

func score(cluster, peer string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(cluster))
	_, _ = h.Write([]byte{'|'})
	_, _ = h.Write([]byte(peer))
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
