package apply_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// TestTrimmedManagedFieldsAnswerAsTheServersDo: of the managed fields the API server
// records, the trimmed ones keep who wrote the object, how and when (drift), and whether
// each Vidra apply owns the owners set (ownership.Stamp) — for an object one owner
// created, one a second owner joined, and one someone else edited — and nothing field by
// field.
func TestTrimmedManagedFieldsAnswerAsTheServersDo(t *testing.T) {
	ctx := context.Background()
	a, b := engine(t, "hub/trim-a"), engine(t, "hub/trim-b")
	applyOK(t, a, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trim-alone}\ndata: {k: v, l: w}\n")
	applyOK(t, a, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trim-shared}\ndata: {common: x}\n")
	applyOK(t, b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trim-shared}\ndata: {common: x}\n")
	applyOK(t, a, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trim-edited}\ndata: {k: v}\n")
	cm, _ := configMap(t, "trim-edited")
	cm.Data["k"] = "by hand"
	if err := member.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}

	owning := map[bool]int{}
	for _, name := range []string{"trim-alone", "trim-shared", "trim-edited"} {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err := member.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, live); err != nil {
			t.Fatal(err)
		}
		trimmed := live.DeepCopy()
		if _, err := apply.TrimCached(trimmed); err != nil {
			t.Fatal(err)
		}
		if len(trimmed.ManagedFields) != len(live.ManagedFields) {
			t.Fatalf("%s: %d managed-fields entries trimmed to %d", name, len(live.ManagedFields), len(trimmed.ManagedFields))
		}
		for i, e := range live.ManagedFields {
			got := trimmed.ManagedFields[i]
			if got.Manager != e.Manager || got.Operation != e.Operation || !got.Time.Equal(e.Time) || got.Subresource != e.Subresource {
				t.Errorf("%s: entry %d is %+v, want manager, operation, time and subresource of %+v", name, i, got, e)
			}
			if got.FieldsV1 != nil && len(got.FieldsV1.GetRawBytes()) >= len(e.FieldsV1.GetRawBytes()) {
				t.Errorf("%s: entry of %s keeps its fields (%s)", name, e.Manager, got.FieldsV1.GetRawString())
			}
		}
		for _, e := range []*apply.Engine{a, b} {
			want := ownership.AppliesOwners(live, e.FieldManager())
			if got := ownership.AppliesOwners(trimmed, e.FieldManager()); got != want {
				t.Errorf("%s: trimmed, %s applies the owners set: %v; the server says %v", name, e.FieldManager(), got, want)
			}
			owning[want]++
		}
	}
	if owning[true] == 0 || owning[false] == 0 {
		t.Fatalf("the objects should have applies that own the owners set and applies that do not: %v", owning)
	}
}
