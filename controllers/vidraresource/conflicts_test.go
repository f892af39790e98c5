package vidraresource

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

func conflicted(holder string) []apply.Result {
	return []apply.Result{{
		Ref:       inventory.Ref{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: "default", Name: "paint"},
		Action:    apply.Conflicted,
		Conflicts: []apply.Conflict{{Field: ".data.color", Manager: apply.FieldManagerPrefix + "hub/" + holder}},
	}}
}

// TestConflictBookRequeuesHoldersOnlyOnChange: recording the same conflicts again
// changes nobody's view, so two VidraResources refusing each other a field do not requeue
// each other forever.
func TestConflictBookRequeuesHoldersOnlyOnChange(t *testing.T) {
	b := newConflictBook()
	if got := b.record("blue", "hub", conflicted("red")); !slices.Equal(got, []string{"red"}) {
		t.Fatalf("first record changed %v, want [red]", got)
	}
	if got := b.record("blue", "hub", conflicted("red")); len(got) != 0 {
		t.Errorf("the same record again changed %v", got)
	}
	if msg := b.heldAgainst("red"); msg != "blue declares ConfigMap default/paint .data.color differently" {
		t.Errorf("heldAgainst = %q", msg)
	}
	if got := b.forget("blue"); !slices.Equal(got, []string{"red"}) {
		t.Errorf("forget changed %v, want [red]", got)
	}
	if msg := b.heldAgainst("red"); msg != "" {
		t.Errorf("after forget: %q", msg)
	}
}
