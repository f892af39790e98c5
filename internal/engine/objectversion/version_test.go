package objectversion_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/engine/objectversion"
)

// TestAVersionGivesBackItsUIDAndResourceVersion: whatever their forms, and only the forms
// the API server writes are held without an allocation.
func TestAVersionGivesBackItsUIDAndResourceVersion(t *testing.T) {
	for _, c := range []struct {
		uid             types.UID
		resourceVersion string
		packed          bool
	}{
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "123456", true},
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "", true},
		{"", "", true},
		{"0B6A3A1E-7F3C-4C1D-9D6E-2F1A0C9B8E7D", "123456", false},
		{"{0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d}", "1", false},
		{"0b6a3a1e7f3c4c1d9d6e2f1a0c9b8e7d", "1", false},
		{"not-a-uuid", "1", false},
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "0123", false},
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "0", false},
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "+1", false},
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "99999999999999999999", false},
		{"0b6a3a1e-7f3c-4c1d-9d6e-2f1a0c9b8e7d", "opaque/42", false},
		{"", "7", true},
		{"00000000-0000-0000-0000-000000000000", "7", false},
	} {
		v := objectversion.Of(c.uid, c.resourceVersion)
		if v.UID() != c.uid || v.ResourceVersion() != c.resourceVersion {
			t.Errorf("Of(%q, %q) gives back %q, %q", c.uid, c.resourceVersion, v.UID(), v.ResourceVersion())
		}
		if !v.Equal(objectversion.Of(c.uid, c.resourceVersion)) {
			t.Errorf("Of(%q, %q) differs from itself", c.uid, c.resourceVersion)
		}
		if v.Equal(objectversion.Of(c.uid, c.resourceVersion+"1")) || v.Equal(objectversion.Of(c.uid+"1", c.resourceVersion)) {
			t.Errorf("Of(%q, %q) equals another version", c.uid, c.resourceVersion)
		}
		if !v.HasResourceVersion(c.resourceVersion) || v.HasResourceVersion(c.resourceVersion+"1") || v.HasResourceVersion("0"+c.resourceVersion) {
			t.Errorf("Of(%q, %q) is at another resourceVersion", c.uid, c.resourceVersion)
		}
		if allocs := testing.AllocsPerRun(10, func() { _ = v.HasResourceVersion(c.resourceVersion) }); allocs != 0 {
			t.Errorf("Of(%q, %q): %v allocations to compare its resourceVersion", c.uid, c.resourceVersion, allocs)
		}
		allocs := testing.AllocsPerRun(10, func() { _ = objectversion.Of(c.uid, c.resourceVersion) })
		if packed := allocs == 0; packed != c.packed {
			t.Errorf("Of(%q, %q): %v allocations", c.uid, c.resourceVersion, allocs)
		}
	}
}
