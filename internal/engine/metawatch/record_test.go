package metawatch

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// TestARecordGivesBackWhatItKeeps: a record rebuilds the metadata it was made of, less
// what it was not told to keep, whatever the forms of its UID and resourceVersion; the
// records of two objects that differ only in identity share what they keep.
func TestARecordGivesBackWhatItKeeps(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	keep := Keep{Labels: []string{"app", "tier"}, Annotations: []string{"note", "empty"}, ManagedFields: true}
	at := metav1.NewTime(time.Unix(1700000000, 0))
	fields := metav1.NewFieldsV1(`{"f:data":{}}`)
	object := func(uid, resourceVersion string) *metav1.PartialObjectMetadata {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps", Name: "cm", UID: types.UID(uid), ResourceVersion: resourceVersion, Generation: 3,
			DeletionTimestamp: &at,
			Labels:            map[string]string{"app": "web", "tier": "", "other": "x"},
			Annotations:       map[string]string{"note": "a\x00b" + strings.Repeat("é", 200), "empty": "", "dropped": "y"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "vidra", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields, Time: &at},
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status"},
			},
		}}
		obj.SetGroupVersionKind(gvk)
		return obj
	}
	for _, id := range []struct{ uid, resourceVersion string }{
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "123456"},
		{"0B6A3A1E-7F3C-4C1D-9D6E-2F1A0C9B8E7D", "123456"},
		{"not-a-uuid", "00123"},
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "opaque/42"},
		{"", ""},
	} {
		obj := object(id.uid, id.resourceVersion)
		want := obj.DeepCopy()
		delete(want.Labels, "other")
		delete(want.Annotations, "dropped")
		r := recordOf(obj, keep)
		got := r.object(gvk, "apps", "cm")
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("uid %q, resourceVersion %q: rebuilt\n%+v\nwant\n%+v", id.uid, id.resourceVersion, got, want)
		}
		if !r.same(recordOf(obj, keep)) {
			t.Errorf("uid %q, resourceVersion %q: two records of one object differ", id.uid, id.resourceVersion)
		}
		if value, ok := r.label("tier"); !ok || value != "" {
			t.Errorf("label tier: %q, %v", value, ok)
		}
		if _, ok := r.label("other"); ok {
			t.Error("a label not kept was found")
		}
	}
	if got := recordOf(object("", ""), Keep{}).object(gvk, "apps", "cm"); got.ManagedFields != nil {
		t.Errorf("managed fields not kept were rebuilt: %+v", got.ManagedFields)
	}
	bare := object("", "")
	bare.ManagedFields = []metav1.ManagedFieldsEntry{}
	if got := recordOf(bare, keep).object(gvk, "apps", "cm"); got.ManagedFields != nil {
		t.Errorf("no managed fields rebuilt as %+v", got.ManagedFields)
	}
	a := recordOf(object("0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "1"), keep)
	b := recordOf(object("1c7b4b2f-8a4d-4d2e-8e7f-3a2b1d0c9f8e", "2"), keep)
	if a.same(b) {
		t.Error("records of two objects are the same")
	}
	if a.shape != b.shape {
		t.Error("what two objects share is held twice")
	}
	if size := unsafe.Sizeof(a); size > 56 {
		t.Errorf("a record is %d bytes", size)
	}
}
