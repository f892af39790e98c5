package ocisource_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/dircache"
	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// newCache returns a cache of artifacts, without limits, with a directory cache of its own.
func newCache(t *testing.T) *ocisource.Cache {
	t.Helper()
	return newCacheIn(t.TempDir(), ocisource.Limits{})
}

// newCacheIn returns a cache of artifacts with a directory cache of its own under root.
func newCacheIn(root string, limits ocisource.Limits) *ocisource.Cache {
	return ocisource.NewCache(dircache.New(root, "fill-", 32, 0), limits)
}

// entry is one tar entry for archives the registry helpers would not write.
type entry struct {
	hdr  tar.Header
	body string
}

func file(name, body string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body: body}
}

func symlinkEntry(name, target string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}}
}

func tarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := e.hdr
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatalf("tar header %s: %v", hdr.Name, err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatalf("tar %s: %v", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pullOne resolves app:v1 and pulls it with a new cache under t.TempDir().
func pullOne(t *testing.T, reg *ociregistry.Registry, limits ocisource.Limits) (dir string, cacheRoot string, err error) {
	t.Helper()
	cacheRoot = t.TempDir()
	cache := newCacheIn(cacheRoot, limits)
	src := ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}
	rev, err := cache.Resolve(t.Context(), src, ocisource.Ref{Tag: "v1"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	dir, release, err := cache.Pull(t.Context(), src, rev)
	if err == nil {
		t.Cleanup(release)
	}
	return dir, cacheRoot, err
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

// requireNoArtifactDirs checks a failed pull left nothing behind.
func requireNoArtifactDirs(t *testing.T, cacheRoot string) {
	t.Helper()
	des, err := os.ReadDir(cacheRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		t.Errorf("left behind in the cache: %s", de.Name())
	}
}

func requireInvalidArtifact(t *testing.T, err error, wantIn string) {
	t.Helper()
	var invalid *ocisource.InvalidArtifactError
	if !errors.As(err, &invalid) {
		t.Fatalf("want *InvalidArtifactError, got %T: %v", err, err)
	}
	if !strings.Contains(err.Error(), wantIn) {
		t.Errorf("error %q does not say %q", err, wantIn)
	}
}

func requireLimit(t *testing.T, err error, limit string) {
	t.Helper()
	var le *ocisource.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("want *LimitError, got %T: %v", err, err)
	}
	if le.Limit != limit || !strings.Contains(err.Error(), limit) {
		t.Errorf("error %q names %s, want %s", err, le.Limit, limit)
	}
}
