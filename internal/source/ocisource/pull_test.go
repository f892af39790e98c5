package ocisource_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

func TestPullExtractsAFluxArtifact(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1", map[string]string{
		"kustomization.yaml":   "resources: [deploy]\n",
		"deploy/app.yaml":      "kind: Deployment\n",
		"deploy/nested/cm.yml": "kind: ConfigMap\n",
	})

	dir, _, err := pullOne(t, reg, ocisource.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "deploy/nested/cm.yml"); got != "kind: ConfigMap\n" {
		t.Errorf("deploy/nested/cm.yml = %q", got)
	}
	if got := readFile(t, dir, "kustomization.yaml"); got != "resources: [deploy]\n" {
		t.Errorf("kustomization.yaml = %q", got)
	}
}

func TestPullAcceptsATarGzipLayerOfAnotherMediaType(t *testing.T) {
	reg := ociregistry.New(t)
	reg.PushLayer(t, "app", "v1", "application/vnd.acme.content.layer.v1.tar+gzip",
		ociregistry.TarGzip(t, map[string]string{"app.yaml": "kind: Service\n"}))

	dir, _, err := pullOne(t, reg, ocisource.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "app.yaml"); got != "kind: Service\n" {
		t.Errorf("app.yaml = %q", got)
	}
}

func TestConcurrentPullsDownloadOnce(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1", manifests)
	cache := newCache(t)
	src := ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}
	rev, err := cache.Resolve(t.Context(), src, ocisource.Ref{Tag: "v1"})
	if err != nil {
		t.Fatal(err)
	}

	const callers = 20
	dirs := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			var release func()
			dirs[i], release, errs[i] = cache.Pull(t.Context(), src, rev)
			if errs[i] == nil {
				defer release()
				_, errs[i] = os.Stat(filepath.Join(dirs[i], "deploy/app.yaml"))
			}
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Errorf("caller %d got %s, caller 0 got %s", i, dirs[i], dirs[0])
		}
	}
	if cache.Pulls() != 1 || reg.BlobGets("app") != 1 || reg.ManifestGets("app") != 1 {
		t.Errorf("Pulls() = %d, blob GETs = %d, manifest GETs = %d; want one each",
			cache.Pulls(), reg.BlobGets("app"), reg.ManifestGets("app"))
	}

	// A later caller reuses the directory without asking the registry.
	dir, release, err := cache.Pull(t.Context(), src, rev)
	if err != nil {
		t.Fatal(err)
	}
	release()
	release() // a second call does nothing
	if dir != dirs[0] || cache.Pulls() != 1 || reg.ManifestGets("app") != 1 {
		t.Errorf("a later Pull downloaded again: dir %s, Pulls() = %d", dir, cache.Pulls())
	}
}

func TestPullOfAMissingDigestIsNotFound(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1", manifests)
	root := t.TempDir()
	cache := newCacheIn(root, ocisource.Limits{})
	missing := "sha256:" + strings.Repeat("0", 64)

	_, _, err := cache.Pull(t.Context(), ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Revision{Digest: missing})
	requireNotFound(t, err, missing)
	requireNoArtifactDirs(t, root)
}

func TestPullRefusesALayerThatIsNotGzip(t *testing.T) {
	reg := ociregistry.New(t)
	reg.PushLayer(t, "app", "v1", ociregistry.FluxContentMediaType, []byte("kind: ConfigMap\n"))

	_, root, err := pullOne(t, reg, ocisource.Limits{})
	requireInvalidArtifact(t, err, "layer is not gzip")
	if !strings.Contains(err.Error(), reg.URL("app")+"@sha256:") {
		t.Errorf("error %q does not name the artifact", err)
	}
	requireNoArtifactDirs(t, root)
}

func TestPullRefusesTwoLayers(t *testing.T) {
	reg := ociregistry.New(t)
	layer := ociregistry.TarGzip(t, manifests)
	reg.PushLayers(t, "app", "v1", ociregistry.FluxContentMediaType, layer, ociregistry.TarGzip(t, map[string]string{"b": "b"}))

	_, root, err := pullOne(t, reg, ocisource.Limits{})
	requireInvalidArtifact(t, err, "the artifact is not a single tar+gzip layer (found 2 layers")
	if reg.BlobGets("app") != 0 {
		t.Errorf("%d blobs downloaded before the artifact was refused", reg.BlobGets("app"))
	}
	requireNoArtifactDirs(t, root)
}

func TestAFailedPullIsTriedAgain(t *testing.T) {
	reg := ociregistry.New(t)
	cache := newCache(t)
	src := ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}
	digest := reg.Push(t, "app", "v1", manifests)
	reg.RequireBasicAuth("user", "pass")

	_, _, err := cache.Pull(t.Context(), src, ocisource.Revision{Tag: "v1", Digest: digest})
	if !ocisource.IsAuthError(err) {
		t.Fatalf("want an auth error, got %v", err)
	}
	src.Username, src.Password = "user", "pass"
	_, release, err := cache.Pull(t.Context(), src, ocisource.Revision{Tag: "v1", Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if cache.Pulls() != 2 {
		t.Errorf("Pulls() = %d, want 2", cache.Pulls())
	}
}

func TestPullWaitsNoLongerThanItsContext(t *testing.T) {
	reg := ociregistry.New(t)
	digest := reg.Push(t, "app", "v1", manifests)
	cache := newCache(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, _, err := cache.Pull(ctx, ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Revision{Digest: digest})
	if err == nil || !errors.Is(err, ctx.Err()) {
		t.Fatalf("want the context's error, got %v", err)
	}
}

// The altered layer is valid gzip of the same files: only the digest check can refuse it.
func TestPullRefusesALayerThatDoesNotMatchItsDigest(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1", manifests)
	reg.TamperBlobs("app")

	_, root, err := pullOne(t, reg, ocisource.Limits{})
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("want a digest mismatch, got %v", err)
	}
	requireNoArtifactDirs(t, root)
}

func TestPullRefusesGzipThatIsNotATar(t *testing.T) {
	reg := ociregistry.New(t)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	_, _ = gz.Write([]byte("kind: ConfigMap\n"))
	_ = gz.Close()
	reg.PushLayer(t, "app", "v1", ociregistry.FluxContentMediaType, buf.Bytes())

	_, root, err := pullOne(t, reg, ocisource.Limits{})
	requireInvalidArtifact(t, err, "tar")
	requireNoArtifactDirs(t, root)
}

// A download cut short is the connection's fault, not the artifact's: it is no
// InvalidArtifactError (which a sync would remember), and the next pull succeeds.
func TestADownloadCutShortIsNotABrokenArtifact(t *testing.T) {
	reg := ociregistry.New(t)
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("cm-%02d.yaml", i)] = strings.Repeat(fmt.Sprintf("line %d of a manifest\n", i), 200)
	}
	reg.Push(t, "app", "v1", files)
	reg.CutBlobs("app", 512)
	_, root, err := pullOne(t, reg, ocisource.Limits{})
	var invalid *ocisource.InvalidArtifactError
	if err == nil || errors.As(err, &invalid) {
		t.Fatalf("Pull of a cut download = %v, want an error that is not an InvalidArtifactError", err)
	}
	requireNoArtifactDirs(t, root)
	reg.CutBlobs("app", 0)
	if _, _, err := pullOne(t, reg, ocisource.Limits{}); err != nil {
		t.Fatalf("Pull after the connection mended: %v", err)
	}
}
