package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/runtime/bytesize"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/hostile"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// tenantCluster is the one cluster the tenant may deliver to.
const tenantCluster = "calm-b"

// chartMemoryLimit is the operator's memory limit in the chart (resources.limits.memory).
const chartMemoryLimit = 1 << 30

// TestHostileSourcesStopOnlyTheirOwnSyncs: a tenant who may deliver to one cluster writes
// syncs of sources that never stop answering (a Git ref advertisement without end, a
// refusal whose body never ends, an OCI tag list of endless pages, a chart whose template
// asks for 1.5 GB); the operator, running with exactly the chart's rights, reads each
// within its bound, stalls those syncs naming the bound, stays well under the chart's
// memory limit, and another team's next commit is delivered meanwhile.
func TestHostileSourcesStopOnlyTheirOwnSyncs(t *testing.T) {
	team := gitserver.New(t).Repo(t, "team")
	team.Commit(t, "main", map[string]string{"deploy/web.yaml": gitConfigMap("v1")}, "v1")
	sources, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sources.Close)
	members := []string{"calm-a", tenantCluster}
	var op *fleetenv.Operator
	feature := features.New("hostile sources stop only their own syncs").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			op = startWithChartRights(ctx, t, members)
			return ctx
		}).
		Assess("another team's GitSync delivers its first commit", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The chart's admission policies take effect a moment after helm made them.
			testfleet.Eventually(t, 30*time.Second, "kubectl apply of the team's GitSync", func() (bool, error) {
				_, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, teamSync(team.URL()), "apply", "-f", "-")
				return err == nil, nil
			})
			for i := range members {
				waitMemberValue(ctx, t, i, "v1")
			}
			return ctx
		}).
		Assess("a tenant's hostile syncs are stalled, naming the bound, with the operator well under its limit", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			defer func() {
				if t.Failed() {
					t.Log(kubectl(ctx, t, nil, "get", "gitsyncs,ocisyncs,helmsyncs", "-o", "yaml"))
					t.Logf("operator logs:\n%s", op.Logs())
				}
			}()
			asTenant := tenantWithDeliver(ctx, t, "mallory", members[1])
			defer dropTenant(ctx, t, "mallory")
			for _, s := range sources.Syncs {
				if _, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, s.Manifest(tenantCluster), asTenant, "apply", "-f", "-"); err != nil {
					t.Fatalf("mallory applies %s %s: %v", s.Kind, s.Name, err)
				}
			}
			for _, s := range sources.Syncs {
				waitCondition(ctx, t, s)
			}
			second := team.Commit(t, "main", map[string]string{"deploy/web.yaml": gitConfigMap("v2")}, "v2")
			start := time.Now()
			kubectl(ctx, t, nil, "annotate", "--overwrite", "gitsync", "team", "vidra.infrahub.operators.com/requested-at="+start.Format(time.RFC3339Nano))
			for i := range members {
				waitMemberValue(ctx, t, i, "v2")
			}
			t.Logf("the other team's commit %s reached %d clusters in %v, beside the hostile syncs", second[:8], len(members), time.Since(start).Round(time.Millisecond))
			select {
			case <-op.Exited():
				t.Fatalf("the operator exited (code %d)", op.ExitCode())
			default:
			}
			peak, err := op.PeakRSS()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("operator peak RSS %s (chart limit %s); the hostile servers sent %s, %s and %s before it stopped reading",
				bytesize.Format(peak), bytesize.Format(chartMemoryLimit), bytesize.Format(sources.Refs.Written()),
				bytesize.Format(sources.Refusal.Written()), bytesize.Format(sources.Tags.Written()))
			if peak > chartMemoryLimit/2 {
				t.Errorf("the operator's peak RSS %s is over half the chart's limit", bytesize.Format(peak))
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "delete", "gitsync", "team", "--ignore-not-found")
			kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/gitsync=team", "--timeout=60s")
			for _, s := range sources.Syncs {
				kubectl(ctx, t, nil, "delete", strings.ToLower(s.Kind), s.Name, "--ignore-not-found")
				kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/"+strings.ToLower(s.Kind)+"="+s.Name, "--timeout=60s")
			}
			stopChartOperator(ctx, t, op, members)
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}

// teamSync is the other team's GitSync of repository url, to every calm cluster.
func teamSync(url string) []byte {
	return fmt.Appendf(nil, `apiVersion: infrahub.operators.com/v1alpha1
kind: GitSync
metadata:
  name: team
spec:
  interval: 1h
  source:
    url: %s
    insecureAllowHTTP: true
    ref: {branch: main}
    path: deploy
  destination:
    clusterSelector: {matchLabels: {site: calm}}
    namespace: default
`, url)
}

// waitCondition waits until s shows Ready=False (and Stalled, when it stalls) with its
// reason and text, and nothing of what its server answered.
func waitCondition(ctx context.Context, t *testing.T, s hostile.Sync) {
	t.Helper()
	condition := "Ready"
	if s.Stalled {
		condition = "Stalled"
	}
	jsonpath := fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%s")].reason}{"|"}{.status.conditions[?(@.type=="%s")].message}`, condition, condition)
	var out string
	testfleet.Eventually(t, 90*time.Second, fmt.Sprintf("%s %s %s %s", s.Kind, s.Name, condition, s.Reason), func() (bool, error) {
		out = kubectl(ctx, t, nil, "get", strings.ToLower(s.Kind), s.Name, "-o", jsonpath)
		reason, message, _ := strings.Cut(out, "|")
		return reason == s.Reason && strings.Contains(message, s.Text), nil
	})
	t.Logf("%s %s: %s", s.Kind, s.Name, out)
	if strings.Contains(out, "denied") {
		t.Errorf("%s %s repeats what the hostile server answered: %s", s.Kind, s.Name, out)
	}
}

// tenantWithDeliver makes user a tenant who may write syncs and deliver to cluster
// only, and returns the kubectl flag that acts as that user; the caller removes the
// tenant's roles (dropTenant).
func tenantWithDeliver(ctx context.Context, t *testing.T, user, cluster string) string {
	t.Helper()
	kubectl(ctx, t, fmt.Appendf(nil, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vidra-syncs-%[1]s
rules:
  - apiGroups: ["infrahub.operators.com"]
    resources: ["gitsyncs", "ocisyncs", "helmsyncs"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  - apiGroups: ["infrahub.operators.com"]
    resources: ["vidraclusters"]
    resourceNames: ["%[2]s"]
    verbs: ["deliver"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vidra-syncs-%[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vidra-syncs-%[1]s
subjects:
  - kind: User
    apiGroup: rbac.authorization.k8s.io
    name: %[1]s
`, user, cluster), "apply", "-f", "-")
	kubeconfig, err := fleetenv.Fleet(ctx).Hub.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	return "--kubeconfig=" + writeFile(t, user+".kubeconfig", kubeconfig)
}

func dropTenant(ctx context.Context, t *testing.T, user string) {
	t.Helper()
	kubectl(ctx, t, nil, "delete", "clusterrole,clusterrolebinding", "vidra-syncs-"+user, "--ignore-not-found")
}

// startWithChartRights installs the chart on the hub, enrolls members in its namespace
// labeled site=calm, and starts the operator acting as the chart's ServiceAccount.
func startWithChartRights(ctx context.Context, t *testing.T, members []string) *fleetenv.Operator {
	t.Helper()
	installChart(ctx, t)
	return startChartOperator(ctx, t, members)
}

// installChart installs the chart on the hub, with no operator running yet.
func installChart(ctx context.Context, t *testing.T) {
	t.Helper()
	hubKubeconfig, err := fleetenv.Fleet(ctx).Hub.WriteKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(helmRun(ctx, t, "install", chartRelease, chartDir(t), "--namespace", chartNamespace, "--create-namespace",
		"--kubeconfig", hubKubeconfig, "--wait=false", "--set", "rbac.localApply=none", "--set", "crds.install=false"))
}

// startChartOperator starts the operator acting as the chart's ServiceAccount, and
// enrolls members in its namespace labeled site=calm.
func startChartOperator(ctx context.Context, t *testing.T, members []string) *fleetenv.Operator {
	t.Helper()
	fleet := fleetenv.Fleet(ctx)
	op, err := fleetenv.StartOperator(ctx, "--kubeconfig="+impersonatingKubeconfig(t, fleet.Hub.Kubeconfig),
		"--cluster-secret-namespace="+chartNamespace, "--infrahub-secret-namespace="+chartNamespace,
		"--content-namespace="+chartNamespace, "--leader-elect", "--leader-election-namespace="+chartNamespace,
		"--hub-id=hostile", "--cluster-probe-interval=1s", "--local-service-account="+chartNamespace+"/"+chartLocalServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range members {
		path := writeFile(t, name+".kubeconfig", fleet.Members[i].Kubeconfig)
		kubectl(ctx, t, nil, "-n", chartNamespace, "create", "secret", "generic", name, "--from-file=kubeconfig="+path)
		kubectl(ctx, t, nil, "-n", chartNamespace, "label", "secret", name, "vidra.infrahub.operators.com/cluster="+name, "site=calm")
	}
	return op
}

// stopChartOperator removes the members, stops the operator and uninstalls the chart.
func stopChartOperator(ctx context.Context, t *testing.T, op *fleetenv.Operator, members []string) {
	t.Helper()
	fleet := fleetenv.Fleet(ctx)
	for _, name := range members {
		kubectl(ctx, t, nil, "-n", chartNamespace, "delete", "secret", name, "--ignore-not-found")
	}
	if !waitFor(30*time.Second, func() bool {
		out, err := fleet.Hub.Kubectl(ctx, nil, "get", "vidraclusters", "-o", "name")
		return err == nil && !slices.ContainsFunc(members, func(m string) bool { return strings.Contains(out, m) })
	}) {
		t.Errorf("VidraClusters %v still there 30s after their Secrets were deleted", members)
	}
	if op != nil {
		if err := op.Stop(30 * time.Second); err != nil {
			t.Errorf("stop operator: %v", err)
		}
	}
	hubKubeconfig, err := fleet.Hub.WriteKubeconfig(t.TempDir())
	if err == nil {
		_, err = helmCommand(ctx, t, "uninstall", chartRelease, "--namespace", chartNamespace, "--kubeconfig", hubKubeconfig)
	}
	if err != nil {
		t.Error(err)
	}
}
