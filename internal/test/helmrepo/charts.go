// Package helmrepo is Helm charts and chart repositories for tests: the charts of
// testdata/charts with the version a test wants, packaged as `helm package` does, served
// by a Helm repository over httptest (index.yaml with digests, ETag and Last-Modified,
// basic auth, TLS, request counts) or pushed to an OCI registry as `helm push` does.
package helmrepo

import (
	"embed"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// testdata holds the charts (testdata/charts/<name>) and files that patch them.
//
//go:embed all:testdata
var testdata embed.FS

// Names of the charts in testdata/charts.
const (
	// CRDsChart installs CRD widgets.example.vidra.dev (crds/widgets.yaml), a Widget
	// named after the release and a ConfigMap <release>-config.
	CRDsChart = "crds-chart"
	// CapsChart writes ConfigMap <release>-caps with the cluster's version, whether it
	// serves example.vidra.dev/v1, and values greeting and cluster (values.schema.json
	// wants greeting a string and replicas an integer ≥ 0); with that API it adds Widget
	// <release>-caps.
	CapsChart = "caps-chart"
	// HooksChart has a ConfigMap, a Deployment (image from .Values.image), pre-install
	// hooks (ConfigMap <release>-pre weight -10, Job <release>-migrate weight -5), a
	// post-install hook, a pre-delete hook and a test Pod.
	HooksChart = "hooks-chart"
)

// WidgetsCRDPath is where crds-chart keeps its CRD.
const WidgetsCRDPath = "crds/widgets.yaml"

// modTime is every file's time, so that packaging a chart twice gives the same bytes.
func modTime() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) }

// Chart loads the testdata chart name with its version set.
func Chart(t ociregistry.T, name, version string) *chart.Chart {
	t.Helper()
	return ChartWith(t, name, version, nil)
}

// ChartWith is Chart with files (path in the chart → content) added or replaced.
func ChartWith(t ociregistry.T, name, version string, files map[string]string) *chart.Chart {
	t.Helper()
	root := path.Join("testdata/charts", name)
	var buffered []*archive.BufferedFile
	err := fs.WalkDir(testdata, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := p[len(root)+1:]
		if _, replaced := files[rel]; replaced {
			return nil
		}
		data, err := testdata.ReadFile(p)
		buffered = append(buffered, &archive.BufferedFile{Name: rel, ModTime: modTime(), Data: data})
		return err
	})
	if err != nil {
		t.Fatalf("helmrepo: read chart %s: %v", name, err)
	}
	for rel, content := range files {
		buffered = append(buffered, &archive.BufferedFile{Name: rel, ModTime: modTime(), Data: []byte(content)})
	}
	ch, err := loader.LoadFiles(buffered)
	if err != nil {
		t.Fatalf("helmrepo: load chart %s: %v", name, err)
	}
	ch.Metadata.Version = version
	return ch
}

// WidgetsCRDWithSize is crds-chart's CRD with a property spec.size added: patch
// WidgetsCRDPath with it for a version whose CRD changes.
func WidgetsCRDWithSize(t ociregistry.T) string {
	t.Helper()
	data, err := testdata.ReadFile("testdata/patches/widgets-with-size.yaml")
	if err != nil {
		t.Fatalf("helmrepo: %v", err)
	}
	return string(data)
}

// Package is ch as the .tgz `helm package` writes (name-version.tgz).
func Package(t ociregistry.T, ch *chart.Chart) []byte {
	t.Helper()
	dir := t.TempDir()
	file, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatalf("helmrepo: package %s: %v", ch.Name(), err)
	}
	data, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		t.Fatalf("helmrepo: read package %s: %v", ch.Name(), err)
	}
	return data
}
