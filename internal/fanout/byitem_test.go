package fanout

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// TestOwnedResourcesAreFoundByTheItemTheyDeliver: each item finds its own VidraResources,
// in name order whatever the map's, and an item with none finds none.
func TestOwnedResourcesAreFoundByTheItemTheyDeliver(t *testing.T) {
	owned := map[string]*vidrav1alpha1.VidraResource{}
	for _, c := range []string{"edge-3", "edge-1", "edge-2"} {
		for _, id := range []string{"a", "b"} {
			name := fmt.Sprintf("sync-%s-%s", id, c)
			owned[name] = &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{
				Name: name, Annotations: map[string]string{vidrav1alpha1.BundleIDAnnotation: id},
			}}
		}
	}
	d := &Delivery{owned: owned, byItem: byItem(owned)}
	for _, id := range []string{"a", "b"} {
		var names []string
		for _, vr := range d.resourcesOf(Item{ID: id}) {
			names = append(names, vr.Name)
		}
		want := []string{"sync-" + id + "-edge-1", "sync-" + id + "-edge-2", "sync-" + id + "-edge-3"}
		if !slices.Equal(names, want) {
			t.Errorf("item %s: %v, want %v", id, names, want)
		}
	}
	if got := d.resourcesOf(Item{ID: "c"}); len(got) != 0 {
		t.Errorf("an item with no VidraResources found %d", len(got))
	}
}
