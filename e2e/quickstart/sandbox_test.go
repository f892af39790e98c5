package quickstart

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// sandbox is a user's shell: kubectl, kubectl vidra and helm on its PATH, a kubeconfig
// with the README's contexts (hub, edge-N-admin for member N), the loopback servers'
// certificate trusted, and their hosts in place of the README's.
type sandbox struct {
	dir   string
	env   []string
	hosts *strings.Replacer
}

// retryReads is the preamble of every script: what a user reads right after a write may
// come before the operator acted on it, and a user looks again; an apply that the API
// server turns away while it starts serving a CRD it just created (it says so) is tried
// again, as a user would.
const retryReads = `set -euo pipefail
kubectl() {
  case "$1 ${2:-}" in
  "vidra history" | "vidra diff" | "vidra rollout" | "get "*)
    for _ in $(seq 60); do command kubectl "$@" && return 0; sleep 1; done
    command kubectl "$@" ;;
  "apply "*)
    local input="" out
    if [[ " $* " == *" -f - "* ]]; then input=$(cat); fi
    for _ in $(seq 30); do
      if out=$(printf '%s\n' "$input" | command kubectl "$@" 2>&1); then echo "$out"; return 0; fi
      if [[ $out != *"There can be a delay between when CustomResourceDefinitions are created"* ]]; then echo "$out" >&2; return 1; fi
      sleep 1
    done
    echo "$out" >&2; return 1 ;;
  *) command kubectl "$@" ;;
  esac
}
`

func newSandbox(ctx context.Context, t *testing.T, fleet *testfleet.Fleet, hosts map[string]string, ca []byte, env ...string) *sandbox {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	plugin, err := fleetenv.PluginBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assets, err := testfleet.BinaryAssetsDirectory()
	if err != nil {
		t.Fatal(err)
	}
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM names no helm binary: run make test, or make helm and set it")
	}
	links := map[string]string{"kubectl": filepath.Join(assets, "kubectl"), "kubectl-vidra": plugin, "helm": helm}
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeKubeconfig(t, fleet, filepath.Join(dir, "kubeconfig"))
	// The same kubeconfig is ~/.kube/config, which some examples name.
	if err := os.Mkdir(filepath.Join(dir, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../kubeconfig", filepath.Join(dir, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	pairs := make([]string, 0, 2*len(hosts))
	for from, to := range hosts {
		pairs = append(pairs, from, to)
	}
	return &sandbox{
		dir: dir,
		env: append([]string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "KUBECONFIG=" + filepath.Join(dir, "kubeconfig"),
			"SSL_CERT_FILE=" + caFile}, env...),
		hosts: strings.NewReplacer(pairs...),
	}
}

// writeKubeconfig writes the admin's kubeconfig of the fleet, with the README's context
// names.
func writeKubeconfig(t *testing.T, fleet *testfleet.Fleet, path string) {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for i, c := range fleet.Clusters() {
		name := "hub"
		if i > 0 {
			name = "edge-" + string(rune('0'+i)) + "-admin"
		}
		cfg, err := clientcmd.Load(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		current := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[name] = cfg.Clusters[current.Cluster]
		merged.AuthInfos[name] = cfg.AuthInfos[current.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	merged.CurrentContext = "hub"
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
}

// alias adds context name to the user's kubeconfig, the same as context of: the name a
// page gives a context the sandbox has under another.
func (s *sandbox) alias(t *testing.T, name, of string) {
	t.Helper()
	path := filepath.Join(s.dir, "kubeconfig")
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[name] = cfg.Contexts[of]
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// run runs script as the user types it, hosts replaced, and returns what it printed and
// its exit code.
func (s *sandbox) run(ctx context.Context, t *testing.T, script string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "-c", retryReads+s.hosts.Replace(script))
	cmd.Dir, cmd.Env = s.dir, s.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("running %q: %v", script, err)
	}
	return string(out), 0
}

// step runs the scripts of a step, which must exit with code want.
func (s *sandbox) step(ctx context.Context, t *testing.T, name string, scripts []string, want int) string {
	t.Helper()
	if len(scripts) == 0 {
		t.Fatalf("no page has an example of step %q", name)
	}
	var all strings.Builder
	for i, script := range scripts {
		out, code := s.run(ctx, t, script)
		all.WriteString(out)
		expected := 0 // only the last example may exit otherwise
		if i == len(scripts)-1 {
			expected = want
		}
		if code != expected {
			t.Fatalf("step %s, example %d exited %d:\n%s\n--- output:\n%s", name, i+1, code, s.hosts.Replace(script), out)
		}
	}
	t.Logf("step %s:\n%s", name, all.String())
	return all.String()
}
