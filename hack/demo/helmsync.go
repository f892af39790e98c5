package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

const (
	// helmSyncName names the demo's HelmSync, and so the release its chart renders.
	helmSyncName = "demo-greeter"
	// helmNamespace is the release's namespace on the members, created by Vidra.
	helmNamespace = "demo-helm"
)

func (s *sandbox) startChartRepo(_ context.Context, _ logr.Logger) error {
	out := filepath.Join(s.dir, "charts")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var err error
	s.charts, err = serveChart(filepath.Join(s.root, "hack", "demo", "chart"), out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "    %s serves %s %s\n", s.charts.url, s.charts.chart, s.charts.version)
	return nil
}

// applyHelmSync delivers the demo's chart to every member of the demo, rendered for each:
// the values name the member and its ring, and the chart reads the member's own version
// and APIs (the pull member's as its agent reports them).
func (s *sandbox) applyHelmSync(ctx context.Context, _ logr.Logger) error {
	sync := fmt.Sprintf(`apiVersion: infrahub.operators.com/v1alpha1
kind: HelmSync
metadata:
  name: %s
spec:
  interval: 30s
  source:
    repoURL: %s
    chart: %s
    version: ">=0.1.0 <1.0.0"
    insecureAllowHTTP: true   # plain http, on loopback only
  release:
    namespace: %s
  values:
    greeting: Hello from ${cluster.name}
    ring: ${cluster.labels.ring}
  destination:
    clusterSelector:
      matchLabels: {demo: "true"}
`, helmSyncName, s.charts.url, s.charts.chart, helmNamespace)
	if err := os.WriteFile(filepath.Join(s.dir, "helmsync.yaml"), []byte(sync), 0o600); err != nil {
		return err
	}
	_, err := s.kubectl(ctx, []byte(sync), "apply", "-f", "-")
	return err
}

// waitHelmReady waits until the HelmSync is Ready with a VidraResource Ready on each
// member it renders for.
func (s *sandbox) waitHelmReady(ctx context.Context, _ logr.Logger) error {
	return s.waitSyncReady(ctx, "helmsync", helmSyncName, vidrav1alpha1.HelmSyncLabel)
}

// waitSyncReady waits until the sync of kind is Ready with a VidraResource (labeled
// label=name) Ready on each member; when it does not come, the error carries what the
// sync says.
func (s *sandbox) waitSyncReady(ctx context.Context, kind, name, label string) error {
	err := s.waitFor(ctx, 90*time.Second, "the "+kind+" and its VidraResource on each member Ready", func() (bool, error) {
		ready, err := s.kubectl(ctx, nil, "get", kind, name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil || ready != "True" {
			return false, nil
		}
		out, err := s.kubectl(ctx, nil, "get", "vidraresources", "-l", label+"="+name,
			"-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}`)
		return err == nil && strings.Count(out, "True") == len(s.fleet.Members), nil
	})
	if err != nil {
		status, _ := s.kubectl(ctx, nil, "get", kind, name, "-o",
			`jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}`)
		return fmt.Errorf("%w; %s %s says:\n%s", err, kind, name, indent(status))
	}
	return nil
}

// showHelm prints the HelmSync and what the chart became on each member.
func (s *sandbox) showHelm(ctx context.Context, out io.Writer) {
	fmt.Fprintln(out, "\n==> kubectl get helmsyncs")
	syncs, _ := s.kubectl(ctx, nil, "get", "helmsyncs")
	fmt.Fprint(out, syncs)
	fmt.Fprintf(out, "\n==> the chart as rendered for each member (ConfigMap %s in %s)\n", helmSyncName, helmNamespace)
	for _, m := range s.fleet.Members {
		data, err := s.kubectl(ctx, nil, "--context", m.Name, "get", "configmap", helmSyncName, "-n", helmNamespace, "-o",
			`jsonpath=greeting {.data.greeting}, ring {.data.ring}, Kubernetes {.data.kubeVersion}, KubeVirt served {.data.kubevirt}`)
		if err != nil {
			data = err.Error()
		}
		fmt.Fprintf(out, "    %s: %s\n", m.Name, data)
	}
	members := fmt.Sprintf("%d members", len(s.fleet.Members))
	if len(s.fleet.Members) == 1 {
		members = "1 member"
	}
	fmt.Fprintf(out, "    the Helm repository so far: index.yaml read %d, not modified %d (304); chart archive downloaded %d, for %s\n",
		s.charts.indexBodies.Load(), s.charts.indexUnmoved.Load(), s.charts.archiveGets.Load(), members)
}

// showHelmHistory prints the chart versions the HelmSync delivered.
func (s *sandbox) showHelmHistory(ctx context.Context, out io.Writer) {
	fmt.Fprintf(out, "\n==> kubectl vidra history helmsync/%s\n", helmSyncName)
	history, _ := s.plugin(ctx, "history", "helmsync/"+helmSyncName, "--context", "hub")
	fmt.Fprint(out, history)
}
