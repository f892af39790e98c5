package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
)

// TestPluginServesTheUI: kubectl vidra ui, run as a user would, prints a URL on 127.0.0.1
// with its access key in the fragment; the views answer the key sent as the page sends it
// (a bearer token), and no view answers without it.
// (The pages themselves are tested in a browser in internal/ui.)
func TestPluginServesTheUI(t *testing.T) {
	feature := features.New("kubectl vidra ui serves the fleet on 127.0.0.1").
		Assess("the printed URL serves the fleet page and its assets", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			binary, err := fleetenv.PluginBinary(ctx)
			if err != nil {
				t.Fatal(err)
			}
			kubeconfig, err := fleetenv.Fleet(ctx).Hub.WriteKubeconfig(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary, "ui", "--kubeconfig="+kubeconfig)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			lines := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(stdout).ReadString('\n')
				lines <- line
			}()
			var line string
			select {
			case line = <-lines:
			case <-time.After(30 * time.Second):
				t.Fatal("kubectl vidra ui printed no URL within 30s")
			}
			m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+/)#key=([0-9a-f]+)`).FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("kubectl vidra ui printed %q, no URL on 127.0.0.1 with its key", line)
			}
			url := m[1]
			resp, err := http.Get(url + "view/")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %sview/ without the key: HTTP %d, want 401", url, resp.StatusCode)
			}
			for path, want := range map[string]string{"": "live.js", "view/": "<h1>Fleet</h1>", "static/live.js": "sessionStorage", "view/graph": "Dependencies"} {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+m[2])
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
					t.Errorf("GET /%s: HTTP %d without %q", path, resp.StatusCode, want)
				}
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}
