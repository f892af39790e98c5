package fanout_test

import (
	"context"
	"crypto/md5" //nolint:gosec // checksums as Infrahub lists them, not security
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// TestStatusTooLargeKeepsTheStatusWithinWhatTheHubStores: the most bundles StatusTooLarge
// lets a sync record, each status as long as a delivery makes it (delivered to more
// clusters than it names, every message as long as bounded leaves it, a target JSON
// escapes), is a status the API server takes, written as the controllers write it (its
// managed fields recorded); twice as many, which the check refuses, the API server
// refuses too.
func TestStatusTooLargeKeepsTheStatusWithinWhatTheHubStores(t *testing.T) {
	sel := map[string]string{"suite": "status-too-large"}
	var clusters []string
	for i := range fanout.ListedResources + 2 {
		clusters = append(clusters, fmt.Sprintf("status-too-large-%02d", i))
		enroll(t, clusters[i], sel)
	}
	// A long name fills the VidraResources' names to the 63 characters they may have.
	h := newHarness(t, "a-sync-whose-name-is-long-enough-to-fill-the-resource-names", selecting(sel), newSource(nil))
	d, targets := h.delivery()
	item := func(i int) fanout.Item {
		id := fmt.Sprintf("%08d-1f2e-4d3c-8b4a-59687766554433", i)[:36]
		sum := sha256.Sum256([]byte(id))
		return fanout.Item{
			ID: id, Name: "artifact-" + id, Target: fmt.Sprintf("device-%05d <R&D>", i), Definition: "device-configuration",
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
	if !strings.Contains(msg, fmt.Sprintf("%d bundles delivered as %d VidraResources", most+1, (most+1)*len(clusters))) {
		t.Fatalf("%d bundles fit, then: %q", most, msg)
	}

	status := func(n int) []vidrav1alpha1.BundleStatus {
		statuses := make([]vidrav1alpha1.BundleStatus, n)
		for i := range statuses {
			it := item(i)
			var names []string
			for _, c := range clusters {
				names = append(names, (h.sync.Name + "-" + c + "-" + it.ID)[:63])
			}
			statuses[i] = vidrav1alpha1.BundleStatus{
				ID: it.ID, Name: it.Name, Target: it.Target, Definition: it.Definition,
				Checksum: it.Checksum, StableChecksum: it.Checksum, Digest: it.Digest, StableDigest: it.Digest, BuiltFrom: it.BuiltFrom,
				Message: strings.Repeat("m", 4096), VidraResources: names,
			}
		}
		return fanout.Bounded(statuses)
	}
	write := func(n int) error {
		before := h.sync.DeepCopy()
		h.sync.Status.Bundles = status(n)
		return hub.Client.Status().Patch(context.Background(), h.sync, client.MergeFrom(before))
	}
	if err := write(most); err != nil {
		t.Fatalf("the status of %d bundles, which the check lets through, is refused: %v", most, err)
	}
	// The estimate is close: what the hub stores is most of what the check allows.
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(vidrav1alpha1.GroupVersion.WithKind("GitSync"))
	if err := hub.Client.Get(context.Background(), client.ObjectKeyFromObject(h.sync), stored); err != nil {
		t.Fatal(err)
	}
	size, err := json.Marshal(stored.Object)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sync as the hub stores it: %d KiB", len(size)>>10)
	if len(size) < 1<<20 {
		t.Errorf("the check refuses a status of %d bundles where the sync takes %d KiB of the 1.5 MiB the hub holds", most+1, len(size)>>10)
	}
	if err := write(2 * most); err == nil {
		t.Errorf("the status of %d bundles is taken: the check refuses what the hub stores", 2*most)
	} else {
		t.Logf("the status of %d bundles is refused: %.200s", 2*most, err)
	}
}

// TestBoundedStatusesDoNotGrowWithTheFleetOrTheErrors: an item delivered to more clusters
// than its status names counts them all; an item's message is cut, and past the budget
// every further one is replaced by a pointer to the sync's conditions.
func TestBoundedStatusesDoNotGrowWithTheFleetOrTheErrors(t *testing.T) {
	many := make([]string, fanout.ListedResources+5)
	for i := range many {
		many[i] = fmt.Sprintf("vr-%02d", i)
	}
	statuses := make([]vidrav1alpha1.BundleStatus, 300)
	for i := range statuses {
		statuses[i] = vidrav1alpha1.BundleStatus{ID: fmt.Sprint(i), VidraResources: slices.Clone(many), Message: strings.Repeat("é", 1000)}
	}
	statuses[1].VidraResources, statuses[2].VidraResources = many[:3], nil
	// As a status recorded by a former delivery: ten named of twenty.
	statuses[3].VidraResources, statuses[3].VidraResourceCount = slices.Clone(many[:fanout.ListedResources]), 20
	statuses[4].Message = ""
	fanout.Bounded(statuses)

	counts := []int32{int32(len(many)), 3, 0, 20}
	for i, want := range counts {
		if got := statuses[i].VidraResourceCount; got != want || len(statuses[i].VidraResources) != min(int(want), fanout.ListedResources) {
			t.Errorf("item %d: %d named, count %d; want count %d", i, len(statuses[i].VidraResources), got, want)
		}
	}
	messages, cut := 0, 0
	for i, st := range statuses {
		if !utf8.ValidString(st.Message) || len(st.Message) > 512 {
			t.Fatalf("item %d: a message of %d bytes (valid UTF-8: %t)", i, len(st.Message), utf8.ValidString(st.Message))
		}
		if strings.HasPrefix(st.Message, "cut:") {
			cut++
		} else {
			messages += len(st.Message)
		}
	}
	if statuses[4].Message != "" || !strings.HasSuffix(statuses[0].Message, "(cut)") || messages > 64<<10 || cut < 150 || cut == len(statuses)-1 {
		t.Errorf("messages: %d bytes, %d replaced, the first %q…, the empty one %q", messages, cut, statuses[0].Message[:20], statuses[4].Message)
	}
}
