package testbundle_test

import (
	"testing"

	"github.com/vidra-operator/vidra/internal/engine/manifest"
	"github.com/vidra-operator/vidra/internal/test/testbundle"
)

// TestBundleHasTheSizeAskedAndDecodes: the generated bundle is at least as large as asked
// and decodes, as Vidra will decode it, into the objects it lists.
func TestBundleHasTheSizeAskedAndDecodes(t *testing.T) {
	b, err := testbundle.New(testbundle.Options{MinBytes: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Manifest) < 5<<20 {
		t.Errorf("%d bytes, want at least 5 MiB", len(b.Manifest))
	}
	objects, err := manifest.Decode(b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != b.Objects() {
		t.Errorf("%d objects decoded, the bundle lists %d", len(objects), b.Objects())
	}
	t.Logf("%d bytes, %d objects (%d CRDs)", len(b.Manifest), len(objects), len(b.CRDs))
}
