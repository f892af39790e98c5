package vidraresource_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/runtime/intern"
)

// TestTheHubCachesVidraResourcesWithSharedStrings: two VidraResources decoded apart come
// out of the cache's transform equal to what was decoded, without managed fields, their
// inventories' repeated strings and their label set one copy.
func TestTheHubCachesVidraResourcesWithSharedStrings(t *testing.T) {
	transform := vidraresource.CompactCached(intern.NewTable(64))
	decoded := func(name string) *vidrav1alpha1.VidraResource {
		vr := &vidrav1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sync": "s"}, Annotations: map[string]string{"digest": name, vidrav1alpha1.BundleNameAnnotation: "artifact"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec: vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "site-1", Namespace: "apps"}},
			Status: vidrav1alpha1.VidraResourceStatus{
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Applied", Message: "applied " + name}},
				ManagedResources: []vidrav1alpha1.ManagedResource{
					{Kind: "ConfigMap", APIVersion: "v1", Name: "cm", Namespace: "apps", Status: "Current", Message: "Resource is always ready"},
					{Kind: "ConfigMap", APIVersion: "v1", Name: "cm-2", Namespace: "apps", Status: "Current"},
					{Kind: "ConfigMap", APIVersion: "v1", Name: "cm-3", Namespace: "apps", Status: "Current"},
				},
			},
		}
		data, err := json.Marshal(vr)
		if err != nil {
			t.Fatal(err)
		}
		out := &vidrav1alpha1.VidraResource{}
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var cached []*vidrav1alpha1.VidraResource
	for _, name := range []string{"a", "b"} {
		vr := decoded(name)
		want := vr.DeepCopy()
		want.ManagedFields = nil
		got, err := transform(vr)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("cached %+v, decoded %+v", got, want)
		}
		cached = append(cached, got.(*vidrav1alpha1.VidraResource))
	}
	a, b := cached[0].Status.ManagedResources[0], cached[1].Status.ManagedResources[0]
	annotation := func(vr *vidrav1alpha1.VidraResource) string {
		return vr.Annotations[vidrav1alpha1.BundleNameAnnotation]
	}
	for _, pair := range [][2]string{
		{a.Kind, b.Kind}, {a.Name, b.Name}, {a.Namespace, b.Namespace}, {a.Message, b.Message},
		{cached[0].Spec.Destination.Cluster, cached[1].Spec.Destination.Cluster}, {annotation(cached[0]), annotation(cached[1])},
	} {
		if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%q is held twice", pair[0])
		}
	}
	if reflect.ValueOf(cached[0].Labels).UnsafePointer() != reflect.ValueOf(cached[1].Labels).UnsafePointer() {
		t.Error("the label set both carry is held twice")
	}
	if inventory := cached[0].Status.ManagedResources; cap(inventory) != len(inventory) {
		t.Errorf("an inventory of %d entries is held in a slice of %d", len(inventory), cap(inventory))
	}
}
