package helmrepo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// Media types of the manifests `helm push` writes.
const (
	HelmConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	HelmContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// PushOCI pushes ch to reg as `helm push <chart>.tgz oci://<host>/<repo>` does: to
// <repo>/<name>:<version> ("+" written "_"), an OCI manifest with Helm's config (the
// chart's metadata) and one layer, the packaged chart. It returns oci://<host>/<repo>,
// the address a HelmSync names (the chart's name is added to it).
func PushOCI(t ociregistry.T, reg *ociregistry.Registry, repo string, ch *chart.Chart) string {
	t.Helper()
	return pushOCI(t, reg, repo, ch.Metadata, Package(t, ch))
}

// PushOCIArchive is PushOCI with data, pushed as it is, as the layer of chart name at
// version: for archives that `helm package` would never write.
func PushOCIArchive(t ociregistry.T, reg *ociregistry.Registry, repo, name, version string, data []byte) string {
	t.Helper()
	return pushOCI(t, reg, repo, &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version}, data)
}

func pushOCI(t ociregistry.T, reg *ociregistry.Registry, repo string, md *chart.Metadata, layer []byte) string {
	t.Helper()
	config, err := json.Marshal(md)
	if err != nil {
		t.Fatalf("helmrepo: chart metadata: %v", err)
	}
	img, err := newHelmImage(config, layer, map[string]string{
		"org.opencontainers.image.title":   md.Name,
		"org.opencontainers.image.version": md.Version,
	})
	if err != nil {
		t.Fatalf("helmrepo: manifest of %s: %v", md.Name, err)
	}
	tag := strings.ReplaceAll(md.Version, "+", "_")
	reg.PushImage(t, repo+"/"+md.Name, tag, img)
	return "oci://" + reg.Host() + "/" + repo
}

// helmImage is an OCI manifest whose config is not an image's: go-containerregistry
// builds the image from its raw parts.
type helmImage struct {
	config, layer []byte
	manifest      []byte
	configDigest  v1.Hash
	layerDigest   v1.Hash
}

func newHelmImage(config, layer []byte, annotations map[string]string) (v1.Image, error) {
	h := &helmImage{config: config, layer: layer}
	var err error
	if h.configDigest, _, err = v1.SHA256(bytes.NewReader(config)); err != nil {
		return nil, fmt.Errorf("config digest: %w", err)
	}
	if h.layerDigest, _, err = v1.SHA256(bytes.NewReader(layer)); err != nil {
		return nil, fmt.Errorf("layer digest: %w", err)
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: HelmConfigMediaType, Digest: h.configDigest, Size: int64(len(config))},
		Layers:        []v1.Descriptor{{MediaType: HelmContentMediaType, Digest: h.layerDigest, Size: int64(len(layer))}},
		Annotations:   annotations,
	}
	if h.manifest, err = json.Marshal(m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return partial.CompressedToImage(h)
}

func (h *helmImage) RawConfigFile() ([]byte, error)      { return h.config, nil }
func (h *helmImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (h *helmImage) RawManifest() ([]byte, error)        { return h.manifest, nil }

func (h *helmImage) LayerByDigest(d v1.Hash) (partial.CompressedLayer, error) {
	switch d {
	case h.layerDigest:
		return static.NewLayer(h.layer, HelmContentMediaType), nil
	case h.configDigest:
		return static.NewLayer(h.config, HelmConfigMediaType), nil
	}
	return nil, fmt.Errorf("no blob %s in the chart's manifest", d)
}
