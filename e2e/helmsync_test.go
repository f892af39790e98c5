package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestHelmSyncDeliversAChartRenderedForEachCluster: a user enrolls two clusters and
// applies a HelmSync of a chart in a Helm repository, with values naming each cluster;
// each cluster gets its own rendering, with its own name and version. A new chart version
// is delivered when a sync is requested, the chart downloaded once per version, and
// kubectl vidra history lists the chart versions a cluster received.
func TestHelmSyncDeliversAChartRenderedForEachCluster(t *testing.T) {
	repo := helmrepo.NewRepo(t)
	repo.Add(helmrepo.ChartWith(t, helmrepo.CapsChart, "1.0.0", map[string]string{"templates/widget.yaml": ""}))
	members := []string{"helm-a", "helm-b"}
	feature := features.New("a HelmSync renders a chart for each cluster and delivers it").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			enrollMembers(ctx, t, members, "site=helm")
			return ctx
		}).
		Setup(startOperator("helmsync", "--cluster-probe-interval=1s")).
		Assess("kubectl apply of a HelmSync delivers the chart, rendered for each cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			defer func() {
				if t.Failed() {
					t.Log(kubectl(ctx, t, nil, "get", "helmsyncs,vidraresources", "-o", "yaml"))
					t.Log(string(operatorFrom(ctx, "helmsync").Logs()))
				}
			}()
			kubectl(ctx, t, fmt.Appendf(nil, `apiVersion: infrahub.operators.com/v1alpha1
kind: HelmSync
metadata:
  name: web
spec:
  interval: 1h
  source:
    repoURL: %s
    chart: caps-chart
    insecureAllowHTTP: true
  values:
    cluster: ${cluster.name}
  destination:
    clusterSelector: {matchLabels: {site: helm}}
    namespace: web
`, repo.URL()), "apply", "-f", "-")
			for i, name := range members {
				waitMemberData(ctx, t, i, "web", "web-caps", "cluster", name)
				waitMemberData(ctx, t, i, "web", "web-caps", "kubeVersion", "v1.36.0")
			}
			var out string
			testfleet.Eventually(t, 30*time.Second, "kubectl get helmsyncs shows the version, Ready", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "helmsyncs")
				return strings.Contains(out, "1.0.0") && strings.Contains(out, "True"), nil
			})
			t.Logf("kubectl get helmsyncs:\n%s", out)
			return ctx
		}).
		Assess("a new chart version is delivered when a sync is requested, downloaded once", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			repo.Add(helmrepo.ChartWith(t, helmrepo.CapsChart, "1.1.0", map[string]string{
				"templates/widget.yaml": "", "values.yaml": "greeting: hello-1.1\ncluster: \"\"\n",
			}))
			// The repository's index is asked again at most every few seconds.
			time.Sleep(5 * time.Second)
			kubectl(ctx, t, nil, "annotate", "helmsync", "web", "--overwrite", "vidra.infrahub.operators.com/requested-at="+time.Now().Format(time.RFC3339Nano))
			for i := range members {
				waitMemberData(ctx, t, i, "web", "web-caps", "greeting", "hello-1.1")
			}
			if n := repo.ArchiveGets(); n != 2 {
				t.Errorf("the repository served %d chart downloads for 2 versions and 2 clusters, want 2", n)
			}
			history := plugin(ctx, t, "history", "helmsync/web")
			t.Logf("kubectl vidra history helmsync/web:\n%s", history)
			if !strings.Contains(history, "1.0.0") || !strings.Contains(history, "1.1.0") {
				t.Errorf("the history does not list both chart versions:\n%s", history)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// This fleet runs no garbage collector: the VidraResources are deleted here,
			// while the operator still runs to release their objects.
			kubectl(ctx, t, nil, "delete", "helmsync", "web")
			kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/helmsync=web", "--timeout=60s")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", members[0], members[1])
			return ctx
		}).
		Teardown(stopOperator("helmsync")).
		Feature()
	testenv.Test(t, feature)
}

// waitMemberData waits until member i has a ConfigMap whose data[key] is value.
func waitMemberData(ctx context.Context, t *testing.T, i int, ns, name, key, value string) {
	t.Helper()
	member := fleetenv.Fleet(ctx).Members[i]
	testfleet.Poll(t, 10*time.Millisecond, 60*time.Second, fmt.Sprintf("ConfigMap %s/%s on member %d with %s %s", ns, name, i, key, value), func() (bool, error) {
		out, err := member.Kubectl(ctx, nil, "get", "configmap", "-n", ns, name, "-o", "jsonpath={.data."+key+"}")
		return err == nil && out == value, nil
	})
}
