package fanout_test

import (
	"context"
	"crypto/md5" //nolint:gosec // checksums as Infrahub lists them, not security
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// TestStatusTooLargeKeepsTheStatusWithinWhatTheHubStores: the most bundles StatusTooLarge
// lets a sync record, each status as long as a delivery makes it, is a status the API
// server takes, written as the controllers write it (its managed fields recorded); twice
// as many, which the check refuses, the API server refuses too.
func TestStatusTooLargeKeepsTheStatusWithinWhatTheHubStores(t *testing.T) {
	// A long name fills the VidraResources' names to the 63 characters they may have.
	h := newHarness(t, "a-sync-whose-name-is-long-enough-to-fill-the-resource-names",
		vidrav1alpha1.SyncOptions{Destination: vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: "edge-1"}}}, newSource(nil))
	d, targets := h.delivery()
	item := func(i int) fanout.Item {
		id := fmt.Sprintf("%08d-1f2e-4d3c-8b4a-59687766554433", i)[:36]
		sum := sha256.Sum256([]byte(id))
		return fanout.Item{
			ID: id, Name: "artifact-" + id, Target: fmt.Sprintf("device-%05d", i), Definition: "device-configuration",
			Checksum: fmt.Sprintf("%x", md5.Sum([]byte(id))), Digest: fmt.Sprintf("sha256:%x", sum), BuiltFrom: fmt.Sprintf("sha256:%x", sum),
		}
	}
	var items []fanout.Item
	for d.StatusTooLarge(items, targets) == "" {
		items = append(items, item(len(items)))
	}
	most := len(items) - 1
	msg := d.StatusTooLarge(items, targets)
	t.Logf("%d bundles fit; one more: %s", most, msg)
	if most < 1000 || !strings.Contains(msg, fmt.Sprintf("%d bundles delivered as %d VidraResources", most+1, most+1)) {
		t.Fatalf("%d bundles fit, then: %q", most, msg)
	}

	status := func(n int) []vidrav1alpha1.ArtifactStatus {
		statuses := make([]vidrav1alpha1.ArtifactStatus, n)
		for i := range statuses {
			it := item(i)
			statuses[i] = vidrav1alpha1.ArtifactStatus{
				ID: it.ID, Name: it.Name, Target: it.Target, Definition: it.Definition,
				Checksum: it.Checksum, StableChecksum: it.Checksum, Digest: it.Digest, StableDigest: it.Digest, BuiltFrom: it.BuiltFrom,
				Message: strings.Repeat("m", 128), VidraResources: []string{h.sync.Name[:52] + "-0123456789"},
			}
		}
		return statuses
	}
	write := func(n int) error {
		before := h.sync.DeepCopy()
		h.sync.Status.Bundles = status(n)
		return hub.Client.Status().Patch(context.Background(), h.sync, client.MergeFrom(before))
	}
	if err := write(most); err != nil {
		t.Fatalf("the status of %d bundles, which the check lets through, is refused: %v", most, err)
	}
	if err := write(2 * most); err == nil {
		t.Errorf("the status of %d bundles is taken: the check refuses what the hub stores", 2*most)
	} else {
		t.Logf("the status of %d bundles is refused: %.200s", 2*most, err)
	}
}
