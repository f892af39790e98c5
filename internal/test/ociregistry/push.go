package ociregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"maps"
	"net/http"
	"path"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the artifacts `flux push artifact` writes.
const (
	FluxConfigMediaType  = "application/vnd.cncf.flux.config.v1+json"
	FluxContentMediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// Push pushes files (path → content) to repo:tag as `flux push artifact` would: an OCI
// manifest with Flux's config media type and annotations and one tar+gzip layer. It
// returns the manifest digest.
func (r *Registry) Push(t T, repo, tag string, files map[string]string) string {
	t.Helper()
	img := fluxImage(map[string]string{
		"org.opencontainers.image.source":   "https://example.invalid/" + repo,
		"org.opencontainers.image.revision": tag,
		"org.opencontainers.image.created":  time.Now().UTC().Format(time.RFC3339),
	})
	return r.PushImage(t, repo, tag, appendLayers(t, img, static.NewLayer(TarGzip(t, files), FluxContentMediaType)))
}

// PushLayer pushes a single-layer artifact whose layer is the given bytes with the given
// media type, whatever they hold.
func (r *Registry) PushLayer(t T, repo, tag string, mediaType string, layer []byte) string {
	t.Helper()
	return r.PushLayers(t, repo, tag, mediaType, layer)
}

// PushLayers pushes an artifact with one layer of the given media type per element of
// layers, in order.
func (r *Registry) PushLayers(t T, repo, tag string, mediaType string, layers ...[]byte) string {
	t.Helper()
	var ls []v1.Layer
	for _, l := range layers {
		ls = append(ls, static.NewLayer(l, types.MediaType(mediaType)))
	}
	return r.PushImage(t, repo, tag, appendLayers(t, fluxImage(nil), ls...))
}

// PushImage pushes img to repo:tag and returns its manifest digest.
func (r *Registry) PushImage(t T, repo, tag string, img v1.Image) string {
	t.Helper()
	ref, err := name.NewTag(r.Host()+"/"+repo+":"+tag, name.StrictValidation)
	if err != nil {
		t.Fatalf("ociregistry: reference for %s:%s: %v", repo, tag, err)
	}
	if err := remote.Write(ref, img, r.remoteOptions()...); err != nil {
		t.Fatalf("ociregistry: push %s: %v", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatalf("ociregistry: digest of %s: %v", ref, err)
	}
	return digest.String()
}

func (r *Registry) remoteOptions() []remote.Option {
	opts := []remote.Option{}
	if user, pass := r.credentials(); user != "" || pass != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: user, Password: pass}))
	}
	if transport, ok := r.server.Client().Transport.(*http.Transport); ok && transport.TLSClientConfig != nil {
		// A TLS registry's certificate is trusted only by the server's own client.
		opts = append(opts, remote.WithTransport(transport))
	}
	return opts
}

func fluxImage(annotations map[string]string) v1.Image {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, FluxConfigMediaType)
	if annotations != nil {
		img = mutate.Annotations(img, annotations).(v1.Image)
	}
	return img
}

func appendLayers(t T, img v1.Image, layers ...v1.Layer) v1.Image {
	t.Helper()
	for _, l := range layers {
		var err error
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatalf("ociregistry: append layer: %v", err)
		}
	}
	return img
}

// TarGzip is files (path → content) as a gzipped tar, with an entry for each parent
// directory as Flux writes them, in a stable order.
func TarGzip(t T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		for dir := path.Dir(p); dir != "." && dir != "/" && !dirs[dir]; dir = path.Dir(dir) {
			dirs[dir] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			t.Fatalf("ociregistry: tar header %s: %v", d, err)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		content := files[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(content))}); err != nil {
			t.Fatalf("ociregistry: tar header %s: %v", p, err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatalf("ociregistry: tar %s: %v", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("ociregistry: close tar: %v", err)
	}
	if err := gz.Close(); err != nil {
		t.Fatalf("ociregistry: close gzip: %v", err)
	}
	return buf.Bytes()
}
