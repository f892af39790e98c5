package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
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
// with its access key; the page answers that URL, and nothing answers without the key.
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
			m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+/)\?key=[0-9a-f]+`).FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("kubectl vidra ui printed %q, no URL on 127.0.0.1 with its key", line)
			}
			url := m[1]
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s without the key: HTTP %d, want 403", url, resp.StatusCode)
			}
			jar, err := cookiejar.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			browser := &http.Client{Jar: jar}
			resp, err = browser.Get(m[0])
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			for path, want := range map[string]string{"": "<h1>Fleet</h1>", "static/live.js": "EventSource", "graph": "Dependencies"} {
				resp, err := browser.Get(url + path)
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
