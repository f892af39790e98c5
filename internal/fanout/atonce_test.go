package fanout

import (
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// A sync that delivers at once numbers its content: a new revision when an item's
// checksum changes or an item comes or goes, none while one is still generating.
func TestRevisionsOfContentDeliveredAtOnce(t *testing.T) {
	ihs := &vidrav1alpha1.InfrahubSync{}
	d := &Delivery{sync: Sync{Object: ihs}}
	items := []Item{{ID: "a", Checksum: "1"}, {ID: "b", Checksum: "2"}}
	first := d.revisionOf(items, nil)
	if first.Revision != 1 || first.Phase != vidrav1alpha1.RolloutCompleted || first.StableRevision != 1 {
		t.Fatalf("first revision: %+v", first)
	}
	ihs.Status.Rollout = &first // as written
	delivered := map[string]vidrav1alpha1.BundleStatus{"a": {ID: "a", Checksum: "1"}, "b": {ID: "b", Checksum: "2"}}
	if again := d.revisionOf(items, delivered); again.Revision != 1 || again.ContentHash != first.ContentHash {
		t.Errorf("the same content is revision %d", again.Revision)
	}
	generating := []Item{{ID: "a", Checksum: "9", Unready: "generating", Generating: true}, {ID: "b", Checksum: "2"}}
	if kept := d.revisionOf(generating, delivered); kept.Revision != 1 {
		t.Errorf("an item still generating made revision %d", kept.Revision)
	}
	if changed := d.revisionOf([]Item{{ID: "a", Checksum: "3"}, {ID: "b", Checksum: "2"}}, delivered); changed.Revision != 2 {
		t.Errorf("a changed checksum made revision %d", changed.Revision)
	}
	if gone := d.revisionOf([]Item{{ID: "a", Checksum: "1"}}, delivered); gone.Revision != 2 {
		t.Errorf("an item gone made revision %d", gone.Revision)
	}
}

// With clusterFromTarget, an item goes to the cluster its target names, and one whose
// target names no cluster is refused with the reason.
func TestAnItemsTargetNamesItsCluster(t *testing.T) {
	d := &Delivery{sync: Sync{Destination: Destination{ByItem: true, Destination: vidrav1alpha1.Destination{Namespace: "web"}}}}
	targets, msg := d.targetsOf(Item{ID: "a", Target: "edge-1"}, nil)
	if msg != "" || len(targets) != 1 || targets[0].destination.Cluster != "edge-1" || targets[0].destination.Namespace != "web" {
		t.Errorf("targets %+v, %q", targets, msg)
	}
	if _, msg := d.targetsOf(Item{ID: "b", Target: "Paris DC"}, nil); msg == "" {
		t.Error("a target naming no cluster was accepted")
	}
}
