package ocisource_test

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

func TestPullRefusesALayerOverMaxArtifactBytesBeforeDownloading(t *testing.T) {
	reg := ociregistry.New(t)
	noise := make([]byte, 64<<10)
	_, _ = rand.Read(noise) // incompressible, so the layer stays large
	reg.Push(t, "app", "v1", map[string]string{"big.bin": string(noise)})

	_, root, err := pullOne(t, reg, ocisource.Limits{MaxArtifactBytes: 16 << 10})
	requireLimit(t, err, "MaxArtifactBytes")
	if !strings.Contains(err.Error(), "16384") {
		t.Errorf("error %q does not give the bound", err)
	}
	if reg.BlobGets("app") != 0 {
		t.Errorf("%d blobs downloaded, want none", reg.BlobGets("app"))
	}
	requireNoArtifactDirs(t, root)
}

func TestPullStopsAtMaxBytes(t *testing.T) {
	reg := ociregistry.New(t)
	// Compresses to almost nothing: only the extracted size can stop it.
	reg.Push(t, "app", "v1", map[string]string{"a.yaml": strings.Repeat("a", 600), "b.yaml": strings.Repeat("b", 600)})

	_, root, err := pullOne(t, reg, ocisource.Limits{MaxBytes: 1000})
	requireLimit(t, err, "MaxBytes")
	requireNoArtifactDirs(t, root)
}

func TestPullStopsAtMaxFiles(t *testing.T) {
	reg := ociregistry.New(t)
	files := map[string]string{}
	for i := range 6 {
		files[fmt.Sprintf("f%d.yaml", i)] = "x: 1\n"
	}
	reg.Push(t, "app", "v1", files)

	_, root, err := pullOne(t, reg, ocisource.Limits{MaxFiles: 5})
	requireLimit(t, err, "MaxFiles")
	requireNoArtifactDirs(t, root)
}

func TestPullWithinLimitsSucceeds(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1", map[string]string{"a.yaml": strings.Repeat("a", 600)})

	if _, _, err := pullOne(t, reg, ocisource.Limits{MaxBytes: 600, MaxFiles: 1}); err != nil {
		t.Fatal(err)
	}
}
