package helmsource_test

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// A chart's .Files are the files loaded with it, held in memory: no name reaches the
// operator's file system.
func TestTemplatesCannotReadFilesOutsideTheChart(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("s3cret-of-the-operator"), 0o600); err != nil {
		t.Fatal(err)
	}
	climbing := strings.Repeat("../", 40) + strings.TrimPrefix(filepath.ToSlash(secret), "/")
	tmpl := `apiVersion: v1
kind: ConfigMap
metadata:
  name: steal
data:
  inside: {{ .Files.Get "files/inside.txt" | quote }}
  absolute: {{ .Files.Get "` + filepath.ToSlash(secret) + `" | quote }}
  climbing: {{ .Files.Get "` + climbing + `" | quote }}
  globs: {{ range $p, $_ := .Files.Glob "/**" }}{{ $p }}{{ end }}{{ range $p, $_ := .Files.Glob "../**" }}{{ $p }}{{ end }}x
  lines: {{ .Files.Lines "/etc/hostname" | len | quote }}
`
	ch := helmrepo.ChartWith(t, helmrepo.CapsChart, "1.0.0", map[string]string{
		"templates/steal.yaml": tmpl, "files/inside.txt": "inside",
	})
	r := render(t, ch, opts())
	cm := find(t, objects(t, r.Manifest), "ConfigMap", "steal")
	if cm.Data["inside"] != "inside" {
		t.Fatalf("a file of the chart is not readable: %v", cm.Data)
	}
	if strings.Contains(string(r.Manifest), "s3cret") || cm.Data["absolute"] != "" || cm.Data["climbing"] != "" ||
		cm.Data["globs"] != "x" || cm.Data["lines"] != "0" {
		t.Fatalf("a template read outside the chart: %v", cm.Data)
	}
}

// The loader refuses names that climb out of the chart or are absolute after its
// directory; a name absolute before it loses its first element and stays inside. No
// entry is ever written to disk on the way.
func TestArchiveEntriesOutsideTheChartAreRefusedOrHarmless(t *testing.T) {
	c := newClient(t, newClock())
	for i, name := range []string{"esc/../../escape.yaml", "esc/templates/../../../escape.yaml", "esc//etc/escape.yaml"} {
		data := tgz(t, entry{name: "esc/Chart.yaml", data: chartYAML("esc")}, entry{name: name, data: []byte("x: 1\n")})
		err := fetchArchive(t, c, "esc", fmt.Sprintf("1.0.%d", i), data)
		requireErrorAs[*helmsource.InvalidError](t, err, "not a Helm chart archive")
	}

	data := tgz(t, entry{name: "esc/Chart.yaml", data: chartYAML("esc")}, entry{name: "/etc/escape.yaml", data: []byte("x: 1\n")})
	repo := helmrepo.NewRepo(t)
	repo.AddArchive("esc", "2.0.0", data)
	s := src(repo, "esc", "2.0.0")
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Fetch(t.Context(), s, v)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range ch.Files {
		names = append(names, f.Name)
		if path.IsAbs(f.Name) || strings.HasPrefix(path.Clean(f.Name), "..") {
			t.Errorf("file %q of the chart is outside it", f.Name)
		}
	}
	if !slices.Equal(names, []string{"etc/escape.yaml"}) {
		t.Errorf("files %v, want etc/escape.yaml, inside the chart", names)
	}
}

func TestOCIArchiveEntriesOutsideTheChartAreRefused(t *testing.T) {
	reg := ociregistry.New(t)
	data := tgz(t, entry{name: "esc/Chart.yaml", data: chartYAML("esc")}, entry{name: "esc/../../escape.yaml", data: []byte("x: 1\n")})
	url := helmrepo.PushOCIArchive(t, reg, "charts", "esc", "1.0.0", data)
	c := newClient(t, newClock())
	s := helmsource.Source{RepoURL: url, Chart: "esc", Version: "1.0.0", InsecureHTTP: true}
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(t.Context(), s, v)
	requireErrorAs[*helmsource.InvalidError](t, err, "escape.yaml")
}
