package apply

import (
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// A memo gives back an object only to the owner whose apply left it, at the version and
// with what that apply declared; names that run into each other when joined are still
// different objects, an owners set is given back as it was whoever is in it, and forgetting an owner forgets nothing of another's.
func TestTheMemoKeepsEachOwnersObjectsApart(t *testing.T) {
	ref := func(group, kind, namespace, name string) inventory.Ref {
		return inventory.Ref{GVK: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Namespace: namespace, Name: name}
	}
	x, y := ref("a", "bc", "ns", "x"), ref("ab", "c", "ns", "x")
	left := func(uid, rv string) *metav1.PartialObjectMetadata {
		obj := &metav1.PartialObjectMetadata{}
		obj.UID, obj.ResourceVersion = types.UID("0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7"+uid), rv
		obj.Annotations = map[string]string{vidrav1alpha1.OwnersAnnotation: `["hub/a"]`}
		obj.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "vidra", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: ownsOwnersFields}}
		return obj
	}
	d1, d2 := declaration{1}, declaration{2}
	var m Memo
	m.remember("hub/a", "vidra", x, left("1", "5"), d1)
	m.remember("hub/b", "vidra", y, left("2", "7"), d2)

	if !m.unchanged("hub/a", x, d1, "5") {
		t.Error("an owner's object as its apply left it is not unchanged")
	}
	for _, c := range []struct {
		owner    string
		ref      inventory.Ref
		declared declaration
		rv       string
	}{{"hub/b", x, d1, "5"}, {"hub/a", y, d1, "5"}, {"hub/a", x, d2, "5"}, {"hub/a", x, d1, "6"}, {"hub/a", x, d1, "05"}} {
		if m.unchanged(c.owner, c.ref, c.declared, c.rv) {
			t.Errorf("%s's %s declaring %x at %q is unchanged", c.owner, c.ref.Key(), c.declared[:1], c.rv)
		}
	}
	if got := m.recall("hub/a", "vidra", x); got == nil || got.UID != left("1", "5").UID || got.ResourceVersion != "5" ||
		got.Annotations[vidrav1alpha1.OwnersAnnotation] != `["hub/a"]` || got.ManagedFields[0].Manager != "vidra" {
		t.Errorf("recalled %+v", got)
	}
	if got := m.recall("hub/a", "vidra", y); got != nil {
		t.Errorf("recalled another owner's object: %+v", got)
	}

	m.Forget("hub/a")
	if m.recall("hub/a", "vidra", x) != nil || m.unchanged("hub/a", x, d1, "5") {
		t.Error("a forgotten owner's object is still remembered")
	}
	if got := m.recall("hub/b", "vidra", y); got == nil || got.Annotations[vidrav1alpha1.OwnersAnnotation] != `["hub/a"]` || !m.unchanged("hub/b", y, d2, "7") {
		t.Error("forgetting one owner forgot another's object")
	}
	if size := unsafe.Sizeof(memoEntry{}); size > 64 {
		t.Errorf("a memo entry is %d bytes", size)
	}
}
