package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// checkImage pulls the image back: one image per platform, each running its binary as
// the non-root user, and the binary of this machine's platform says the release's
// version. The archive in the release holds the same index.
func checkImage(t *testing.T, ref, out string) {
	idx := pulledIndex(t, ref)
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range manifest.Manifests {
		platforms = append(platforms, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/vidra"}) || cf.Architecture != desc.Platform.Architecture {
			t.Errorf("the %s image runs %v as %q on %s", desc.Platform, cf.Config.Entrypoint, cf.Config.User, cf.Architecture)
		}
		if desc.Platform.OS != runtime.GOOS || desc.Platform.Architecture != runtime.GOARCH {
			continue
		}
		files := filesOf(t, img)
		if got := runBinary(t, files["vidra"], "--version"); got != "vidra "+testVersion+"\n" {
			t.Errorf("the image's /vidra --version printed %q", got)
		}
		if !bytes.Contains(files["etc/passwd"], []byte("nonroot:x:65532:65532:")) {
			t.Errorf("the image's /etc/passwd names no nonroot user:\n%s", files["etc/passwd"])
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("the image is for %v, want %v", platforms, want)
	}
	checkImageArchive(t, filepath.Join(out, "vidra_"+testVersion+"_image.oci.tar"), idx)
}

// checkImageArchive finds in the OCI layout archive the index that was pushed, tagged
// with the version.
func checkImageArchive(t *testing.T, archive string, pushed v1.ImageIndex) {
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for name, data := range untar(t, f) {
		if strings.HasSuffix(name, "/") {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("the image archive is no OCI layout: %v", err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, err := pushed.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != want || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Errorf("the image archive lists %+v, want the pushed index %s tagged %s", m.Manifests, want, testVersion)
	}
}

// checkPushed finds in pushed.txt the image and the chart the registry holds, by digest.
func checkPushed(t *testing.T, registry, out string) {
	image := registry + "/vidra:" + testVersion
	digest, err := pulledIndex(t, image).Digest()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(readFile(t, filepath.Join(out, "pushed.txt")))), "\n")
	if len(lines) != 2 || lines[0] != image+"@"+digest.String() || !strings.HasPrefix(lines[1], registry+"/charts/vidra:0.9.0@sha256:") {
		t.Errorf("pushed.txt lists %q, want %s@%s and the chart", lines, image, digest)
	}
}

// checkChart reads the chart from the registry as `helm install` would, and renders it:
// it runs the image pushed, and refuses a Kubernetes without ValidatingAdmissionPolicy v1.
func checkChart(t *testing.T, helm, registry string) {
	chart := "oci://" + registry + "/charts/vidra"
	var meta struct{ Version, AppVersion, KubeVersion string }
	if err := yaml.Unmarshal(runHelm(t, helm, "show", "chart", chart, "--version", "0.9.0", "--plain-http"), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != "0.9.0" || meta.AppVersion != testVersion || meta.KubeVersion == "" {
		t.Errorf("the chart is version %q, appVersion %q, kubeVersion %q", meta.Version, meta.AppVersion, meta.KubeVersion)
	}
	rendered := runHelm(t, helm, "template", "vidra", chart, "--version", "0.9.0", "--plain-http",
		"--namespace", "vidra-system", "--kube-version", testfleet.KubeVersion)
	var images []string
	for doc := range strings.SplitSeq(string(rendered), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	if want := []string{registry + "/vidra:" + testVersion}; !slices.Equal(images, want) {
		t.Errorf("the chart runs %v, want %v", images, want)
	}
	old := helmCommand(t, helm, "template", "vidra", chart, "--version", "0.9.0", "--plain-http", "--kube-version", "1.29.0")
	if out, err := old.CombinedOutput(); err == nil || !strings.Contains(string(out), "kubeVersion") {
		t.Errorf("the chart rendered for Kubernetes 1.29 (%v):\n%s", err, out)
	}
}

// helmCommand runs helm as a user who has never used it: no repositories, no cache.
func helmCommand(t *testing.T, helm string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	return cmd
}

func runHelm(t *testing.T, helm string, args ...string) []byte {
	t.Helper()
	out, err := helmCommand(t, helm, args...).Output()
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}
