package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs as this user, as distroless's nonroot does: the chart's pod security
// context asks for a non-root user, and a numeric one lets the kubelet check it.
const (
	nonRootID   = 65532
	nonRootUser = "65532:65532"
	entrypoint  = "/vidra"
)

// baseFiles are all the image holds besides the binary: a user database naming the
// non-root user, its home, and /tmp. The binary is static and carries its own CA roots.
func baseFiles() []entry {
	return []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonRootID},
		{name: "tmp/", mode: 0o1777},
	}
}

// buildImage builds the operator's image for each of binaries' platforms, and the index
// that names them.
func buildImage(cfg config, binaries []binary) (v1.ImageIndex, error) {
	base, err := layerOf(baseFiles(), cfg)
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range binaries {
		img, err := platformImage(cfg, base, b)
		if err != nil {
			return nil, fmt.Errorf("building the image for %s: %w", b.platform(), err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.os, Architecture: b.arch}},
		})
	}
	return mutate.Annotations(idx, imageLabels(cfg)).(v1.ImageIndex), nil
}

func platformImage(cfg config, base v1.Layer, b binary) (v1.Image, error) {
	data, err := os.ReadFile(b.path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", b.path, err)
	}
	bin, err := layerOf([]entry{{name: entrypoint[1:], mode: 0o755, data: data}}, cfg)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: b.arch,
		OS:           b.os,
		Config: v1.Config{
			User:       nonRootUser,
			Entrypoint: []string{entrypoint},
			WorkingDir: "/",
			Env:        []string{"HOME=/home/nonroot"},
			Labels:     imageLabels(cfg),
		},
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: cfg.created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "vidra release: base"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: created, CreatedBy: "vidra release: " + entrypoint}})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, created)
}

// layerOf makes a gzip-compressed OCI layer of entries, compressed once: its digest,
// the archive and the push all read the same bytes.
func layerOf(entries []entry, cfg config) (v1.Layer, error) {
	data, err := tarBytes(entries, cfg.created)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// imageLabels are the OCI annotations that say what the image is.
func imageLabels(cfg config) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "vidra",
		"org.opencontainers.image.description": "Vidra delivers Kubernetes manifests and KubeVirt VMs to a fleet of clusters",
		"org.opencontainers.image.version":     cfg.version,
		"org.opencontainers.image.source":      "https://github.com/vidra-operator/vidra",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     cfg.created.Format("2006-01-02T15:04:05Z"),
	}
}

// imageArchive names the image's file: an OCI image layout in a tar, which
// `skopeo copy oci-archive:…` or `crane push` takes as it is.
func imageArchive(cfg config) string { return "vidra_" + cfg.version + "_image.oci.tar" }

// writeImageArchive writes the index as an OCI image layout, tagged with the version,
// in one tar.
func writeImageArchive(cfg config, idx v1.ImageIndex, work string) error {
	dir := filepath.Join(work, "oci-layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the image layout: %w", err)
	}
	tag := map[string]string{"org.opencontainers.image.ref.name": cfg.version}
	if err := p.AppendIndex(idx, layout.WithAnnotations(tag)); err != nil {
		return fmt.Errorf("writing the image layout: %w", err)
	}
	entries, err := dirEntries(dir)
	if err != nil {
		return fmt.Errorf("reading the image layout: %w", err)
	}
	f, err := os.Create(filepath.Join(cfg.out, imageArchive(cfg)))
	if err != nil {
		return err
	}
	if err := writeTar(f, entries, cfg.created); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	return f.Close()
}
