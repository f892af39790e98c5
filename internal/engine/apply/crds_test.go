package apply

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A CRD is taken for as the apply left it only when its status (and what the status
// writes leave in its metadata) alone changed.
func TestOnlyAStatusChangeKeepsTheAppliedCRD(t *testing.T) {
	applied := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "w", "resourceVersion": "5", "labels": map[string]any{"a": "b"},
				"managedFields": []any{map[string]any{"manager": "vidra:hub/x", "operation": "Apply"}}},
			"spec": map[string]any{"group": "example.com"},
		}}
	}
	established := applied()
	established.SetResourceVersion("7")
	established.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}}
	established.Object["metadata"].(map[string]any)["managedFields"] = []any{
		map[string]any{"manager": "vidra:hub/x", "operation": "Apply"},
		map[string]any{"manager": "kube-apiserver", "operation": "Update", "subresource": "status"},
	}
	if !changedInStatusAlone(applied(), established) {
		t.Error("a CRD whose status alone changed is taken for changed")
	}
	for name, change := range map[string]func(u *unstructured.Unstructured){
		"label":         func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "c"}) },
		"spec":          func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"group": "other.com"} },
		"managedFields": func(u *unstructured.Unstructured) { u.SetManagedFields(nil) },
	} {
		changed := established.DeepCopy()
		change(changed)
		if changedInStatusAlone(applied(), changed) {
			t.Errorf("a CRD whose %s changed too is taken for changed in its status alone", name)
		}
	}
	if established.GetResourceVersion() != "7" || len(established.GetManagedFields()) != 2 {
		t.Error("the comparison changed the objects")
	}
}
