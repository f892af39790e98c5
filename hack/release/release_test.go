package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

const testVersion = "v0.9.0"

// A user runs `make release` against a registry on loopback and gets every file of a
// release, an image that runs as it says, and a chart in the registry that runs it.
func TestMakeReleaseBuildsAndPushesWhatATeamInstalls(t *testing.T) {
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM names the helm binary the chart is rendered with (make test sets it)")
	}
	reg := ociregistry.New(t)
	registry := reg.Host() + "/rel"
	out := t.TempDir()
	makeRelease(t, "VERSION="+testVersion, "REGISTRY="+registry, "PLAIN_HTTP=1", "RELEASE_DIR="+out)

	t.Run("files", func(t *testing.T) { checkFiles(t, out) })
	t.Run("plugin", func(t *testing.T) { checkPlugin(t, out) })
	t.Run("sbom", func(t *testing.T) { checkSBOMs(t, out) })
	t.Run("image", func(t *testing.T) { checkImage(t, registry+"/vidra:"+testVersion, out) })
	t.Run("pushed", func(t *testing.T) { checkPushed(t, registry, out) })
	t.Run("chart", func(t *testing.T) { checkChart(t, helm, registry) })
}

// makeRelease runs `make release` in the repository at the lowest priority: it compiles
// for four platforms, and other packages' tests run beside it.
func makeRelease(t *testing.T, vars ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "nice", append([]string{"-n", "19", "make", "--no-print-directory", "release"}, vars...)...)
	cmd.Dir = filepath.Join("..", "..")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") && !strings.HasPrefix(kv, "MFLAGS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	t.Logf("make release:\n%s", out)
	if err != nil {
		t.Fatalf("make release: %v", err)
	}
}

var wantFiles = []string{
	"checksums.txt",
	"kubectl-vidra.yaml",
	"kubectl-vidra_v0.9.0_darwin_amd64.cdx.json",
	"kubectl-vidra_v0.9.0_darwin_amd64.tar.gz",
	"kubectl-vidra_v0.9.0_darwin_arm64.cdx.json",
	"kubectl-vidra_v0.9.0_darwin_arm64.tar.gz",
	"kubectl-vidra_v0.9.0_linux_amd64.cdx.json",
	"kubectl-vidra_v0.9.0_linux_amd64.tar.gz",
	"kubectl-vidra_v0.9.0_linux_arm64.cdx.json",
	"kubectl-vidra_v0.9.0_linux_arm64.tar.gz",
	"pushed.txt",
	"vidra-0.9.0.tgz",
	"vidra_v0.9.0_image.oci.tar",
	"vidra_v0.9.0_linux_amd64.cdx.json",
	"vidra_v0.9.0_linux_arm64.cdx.json",
}

// checkFiles finds exactly the release's files, each with the sum checksums.txt gives.
func checkFiles(t *testing.T, out string) {
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, wantFiles) {
		t.Errorf("the release holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantFiles, "\n"))
	}
	sums := readFile(t, filepath.Join(out, checksumsFile))
	listed := 0
	for line := range strings.Lines(string(sums)) {
		sum, file, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Fatalf("checksums.txt: %q is not `<sha256>  <file>`", line)
		}
		if actual, err := sha256File(filepath.Join(out, file)); err != nil || actual != sum {
			t.Errorf("checksums.txt gives %s for %s, which is %s (%v)", sum, file, actual, err)
		}
		listed++
	}
	if listed != len(wantFiles)-1 {
		t.Errorf("checksums.txt lists %d files, want every file but itself (%d)", listed, len(wantFiles)-1)
	}
}

// checkPlugin finds the krew manifest naming each archive by its sum, and the archive of
// this machine's platform holding a plugin that says the release's version.
func checkPlugin(t *testing.T, out string) {
	var manifest krewPlugin
	if err := yaml.UnmarshalStrict(readFile(t, filepath.Join(out, krewManifest)), &manifest); err != nil {
		t.Fatalf("the krew manifest: %v", err)
	}
	if manifest.Spec.Version != testVersion || len(manifest.Spec.Platforms) != 4 {
		t.Fatalf("the krew manifest gives version %s and %d platforms", manifest.Spec.Version, len(manifest.Spec.Platforms))
	}
	for _, p := range manifest.Spec.Platforms {
		file := path(p.URI)
		if sum, err := sha256File(filepath.Join(out, file)); err != nil || sum != p.SHA256 {
			t.Errorf("krew gives %s for %s, which is %s (%v)", p.SHA256, file, sum, err)
		}
		if p.Selector.MatchLabels["os"] != runtime.GOOS || p.Selector.MatchLabels["arch"] != runtime.GOARCH {
			continue
		}
		files := untarGzip(t, filepath.Join(out, file))
		if len(files) != 2 || len(files["LICENSE"]) == 0 {
			t.Errorf("%s holds %d files, want kubectl-vidra and LICENSE", file, len(files))
		}
		if got := runBinary(t, files["kubectl-vidra"], "version", "--client"); got != "client: "+testVersion+"\n" {
			t.Errorf("kubectl vidra version --client printed %q", got)
		}
	}
}

// checkSBOMs finds in each SBOM the modules its binary links: client-go in both, Flux's
// apply engine in the operator only.
func checkSBOMs(t *testing.T, out string) {
	for _, b := range targets {
		var bom cdx.BOM
		data := readFile(t, filepath.Join(out, b.name+"_"+testVersion+"_"+b.platform()+".cdx.json"))
		if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
			t.Fatalf("the SBOM of %s %s: %v", b.name, b.platform(), err)
		}
		if bom.Metadata.Component.Version != testVersion || bom.Components == nil {
			t.Fatalf("the SBOM of %s %s names version %q", b.name, b.platform(), bom.Metadata.Component.Version)
		}
		modules := map[string]bool{}
		for _, c := range *bom.Components {
			modules[c.Name] = c.Version != ""
		}
		if !modules["stdlib"] || !modules["k8s.io/client-go"] || modules["github.com/fluxcd/pkg/ssa"] != (b.name == "vidra") {
			t.Errorf("the SBOM of %s %s lists %d modules, wrongly", b.name, b.platform(), len(modules))
		}
	}
}

func path(uri string) string { return uri[strings.LastIndex(uri, "/")+1:] }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// runBinary writes data to a file and runs it with args, returning what it printed.
func runBinary(t *testing.T, data []byte, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return string(out)
}

func untarGzip(t *testing.T, path string) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	return untar(t, zr)
}

func untar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "/")] = data
	}
}

// pulledIndex pulls the image index at ref from the registry on loopback.
func pulledIndex(t *testing.T, ref string) v1.ImageIndex {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	return idx
}

// filesOf flattens img's layers.
func filesOf(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	return untar(t, rc)
}
