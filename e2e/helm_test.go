package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const (
	chartNamespace = "vidra-chart"
	chartRelease   = "vidra"
	// chartServiceAccount is the chart's ServiceAccount for release "vidra" (its full name).
	chartServiceAccount = "vidra"
	chartSAUser         = "system:serviceaccount:" + chartNamespace + ":" + chartServiceAccount
	// chartLocalServiceAccount is who bundles for the hub are applied as.
	chartLocalServiceAccount = chartServiceAccount + "-local"
	chartLocalSAUser         = "system:serviceaccount:" + chartNamespace + ":" + chartLocalServiceAccount
)

// chart is the module's chart; the test is skipped when there is no helm to run it with.
func chart(t *testing.T) fleetenv.Chart {
	t.Helper()
	c, err := fleetenv.TheChart()
	switch {
	case errors.Is(err, fleetenv.ErrNoHelm):
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	return c
}

// helmRun runs helm, failing the test on error.
func helmRun(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := chart(t).Helm(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func helmCommand(ctx context.Context, t *testing.T, args ...string) (string, error) {
	t.Helper()
	return chart(t).Helm(ctx, args...)
}

// chartDir is charts/vidra of the module.
func chartDir(t *testing.T) string {
	t.Helper()
	return chart(t).Dir()
}

// renderChart runs helm template with the given --set values and parses the result.
func renderChart(ctx context.Context, t *testing.T, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := chart(t).Render(ctx, chartRelease, chartNamespace, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

// grant is one RBAC rule of a rendered Role or ClusterRole.
type grant struct {
	kind, namespace, name string
	apiGroups, resources  []string
	resourceNames         []string
	verbs                 []string
}

func (g grant) String() string {
	return fmt.Sprintf("%s %s/%s: groups %q resources %q verbs %q", g.kind, g.namespace, g.name, g.apiGroups, g.resources, g.verbs)
}

func grants(t *testing.T, objs []*unstructured.Unstructured) []grant {
	t.Helper()
	var out []grant
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, err := unstructured.NestedSlice(o.Object, "rules")
		if err != nil {
			t.Fatalf("%s %s: rules: %v", o.GetKind(), o.GetName(), err)
		}
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			strs := func(key string) []string {
				s, _, _ := unstructured.NestedStringSlice(rule, key)
				return s
			}
			out = append(out, grant{kind: o.GetKind(), namespace: o.GetNamespace(), name: o.GetName(),
				apiGroups: strs("apiGroups"), resources: strs("resources"), resourceNames: strs("resourceNames"), verbs: strs("verbs")})
		}
	}
	return out
}

// onSecrets reports whether the rule grants anything on core Secrets.
func (g grant) onSecrets() bool {
	return len(g.verbs) > 0 &&
		(slices.Contains(g.apiGroups, "") || slices.Contains(g.apiGroups, "*")) &&
		(slices.Contains(g.resources, "secrets") || slices.Contains(g.resources, "*"))
}

func (g grant) wildcard() bool {
	return slices.Contains(g.apiGroups, "*") || slices.Contains(g.resources, "*") || slices.Contains(g.verbs, "*")
}

func secretGrants(t *testing.T, objs []*unstructured.Unstructured) []grant {
	var out []grant
	for _, g := range grants(t, objs) {
		if g.onSecrets() {
			out = append(out, g)
		}
	}
	return out
}

// checkRestricted asserts the restricted Pod Security Standard fields of the Deployment and
// returns its container's args.
func checkRestricted(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	deploy := findObject(t, objs, "Deployment")
	pod, _, _ := unstructured.NestedMap(deploy.Object, "spec", "template", "spec")
	if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if v, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type"); v != "RuntimeDefault" {
		t.Errorf("pod seccompProfile.type = %q, want RuntimeDefault", v)
	}
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c, _ := containers[0].(map[string]any)
	if name, _, _ := unstructured.NestedString(c, "name"); name != "vidra" {
		t.Errorf("container name %q, want vidra", name)
	}
	if v, found, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation"); !found || v {
		t.Error("container allowPrivilegeEscalation is not false")
	}
	if v, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !v {
		t.Error("container readOnlyRootFilesystem is not true")
	}
	if v, _, _ := unstructured.NestedBool(c, "securityContext", "runAsNonRoot"); !v {
		t.Error("container runAsNonRoot is not true")
	}
	if drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop"); !slices.Equal(drop, []string{"ALL"}) {
		t.Errorf("container capabilities.drop = %q, want [ALL]", drop)
	}
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	return args
}

func wantArgs(t *testing.T, mode string, args []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("%s mode: args %q lack %q", mode, args, w)
		}
	}
}

// impersonatingKubeconfig returns the hub's admin kubeconfig, changed to act as the
// chart's ServiceAccount: the operator then has exactly the chart's rights.
func impersonatingKubeconfig(t *testing.T, hubKubeconfig []byte) string {
	t.Helper()
	data, err := fleetenv.ServiceAccountKubeconfig(hubKubeconfig, chartNamespace, chartServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "vidra-sa.kubeconfig", data)
}

// canI runs kubectl auth can-i on the hub as the chart's ServiceAccount; kubectl answers
// "no" with exit code 1.
func canI(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, append([]string{"auth", "can-i", "--as", chartSAUser}, args...)...)
	answer := strings.TrimSpace(out)
	if err != nil && answer != "no" {
		t.Fatalf("kubectl auth can-i %v: %q, %v", args, answer, err)
	}
	return answer
}

// forbiddenLines returns the log lines that report a request refused by RBAC.
func forbiddenLines(logs []byte) []string {
	var out []string
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			out = append(out, line)
		}
	}
	return out
}

// waitFor polls cond every 100ms for up to timeout. Unlike testfleet.Eventually it does
// not fail the test, so a cleanup goes on.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

func TestHelmChart(t *testing.T) {
	chart(t) // skipped without helm
	const (
		clusterName = "helm-edge"
		vrName      = "helm-hello"
		localVRName = "helm-local"
	)
	var (
		op         *fleetenv.Operator
		installed  bool
		secretMade bool
		vrApplied  bool
		// localVRApplied: a VidraResource for the local cluster, which the chart
		// installed with rbac.localApply=none does not let the operator deliver.
		localVRApplied bool
	)

	render := features.New("the chart lints and renders least-privilege, restricted objects").
		Assess("helm lint passes in hub and standalone mode", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			t.Log(helmRun(ctx, t, "lint", chartDir(t)))
			t.Log(helmRun(ctx, t, "lint", chartDir(t), "--set", "mode=standalone"))
			return ctx
		}).
		Assess("hub mode: restricted pod, Secrets only through a Role of the release namespace and in pull clusters' namespaces", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, localApply := range []string{"broad", "none"} {
				objs := renderChart(ctx, t, "rbac.localApply="+localApply)
				args := checkRestricted(t, objs)
				wantArgs(t, "hub", args, "--cluster-provider=secret", "--cluster-secret-namespace="+chartNamespace,
					"--infrahub-secret-namespace="+chartNamespace, "--leader-elect", "--leader-election-namespace="+chartNamespace,
					"--zap-log-level=info", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--webhook-bind-address=:8090")
				var inRole bool
				for _, g := range secretGrants(t, objs) {
					switch {
					case g.kind == "Role" && g.namespace == chartNamespace && !g.wildcard():
						inRole = true
						// The content store's chunks; patch also writes renewed tokens back.
						if !slices.Equal(g.verbs, []string{"get", "list", "create", "update", "patch", "delete", "watch"}) {
							t.Errorf("Secrets verbs %q, want get list create update patch delete watch", g.verbs)
						}
					case g.kind == "ClusterRole" && g.name == chartRelease+"-pull":
						// Bound by kubectl vidra enroll --pull in a pull cluster's own
						// namespace, and nowhere else: the content its agent reads.
					case localApply == "broad" && g.kind == "ClusterRole" && (g.name == chartRelease+"-local-apply" || g.name == chartRelease+"-local-read"):
						// The documented rbac.localApply=broad choice: anything on the local
						// cluster for the local ServiceAccount, reading it for the operator.
					default:
						t.Errorf("localApply=%s: a rule outside the release namespace's Role grants Secrets: %s", localApply, g)
					}
				}
				if !inRole {
					t.Errorf("localApply=%s: no Role of %s grants Secrets in hub mode", localApply, chartNamespace)
				}
			}
			return ctx
		}).
		Assess("the Grafana dashboard and the alerts render behind their values", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, o := range renderChart(ctx, t) {
				if o.GetKind() == "PrometheusRule" || (o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard")) {
					t.Errorf("%s %s rendered by default", o.GetKind(), o.GetName())
				}
			}
			objs := renderChart(ctx, t, "grafanaDashboard.enabled=true", "prometheusRule.enabled=true", "prometheusRule.labels.release=prom")
			dashboard := findObject(t, objs, "ConfigMap")
			if dashboard.GetLabels()["grafana_dashboard"] != "1" {
				t.Errorf("dashboard labels %v: the Grafana sidecar selects grafana_dashboard=1", dashboard.GetLabels())
			}
			data, _, _ := unstructured.NestedString(dashboard.Object, "data", "vidra-fleet.json")
			if !json.Valid([]byte(data)) || !strings.Contains(data, "vidra_resource_ready") {
				t.Errorf("the dashboard ConfigMap does not hold the dashboard JSON:\n%.300s", data)
			}
			rule := findObject(t, objs, "PrometheusRule")
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			if len(groups) != 1 || rule.GetLabels()["release"] != "prom" {
				t.Errorf("PrometheusRule groups %d, labels %v", len(groups), rule.GetLabels())
			}
			return ctx
		}).
		Assess("reconcileOnEvents and the content store reach the operator's flags", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			args := checkRestricted(t, renderChart(ctx, t))
			wantArgs(t, "hub", args, "--content-namespace="+chartNamespace)
			if slices.Contains(args, "--reconcile-on-events") {
				t.Errorf("the default values render --reconcile-on-events: %q", args)
			}
			wantArgs(t, "reconcileOnEvents=true", checkRestricted(t, renderChart(ctx, t, "reconcileOnEvents=true")), "--reconcile-on-events")
			return ctx
		}).
		Assess("replicas > 1 shards the fleet in hub mode and is refused in standalone mode", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if args := checkRestricted(t, renderChart(ctx, t)); slices.Contains(args, "--sharding") {
				t.Errorf("one replica renders --sharding: %q", args)
			}
			objs := renderChart(ctx, t, "replicas=3")
			wantArgs(t, "hub, 3 replicas", checkRestricted(t, objs), "--sharding", "--leader-elect", "--leader-election-namespace="+chartNamespace)
			deploy := findObject(t, objs, "Deployment")
			if n, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "replicas"); fmt.Sprint(n) != "3" {
				t.Errorf("Deployment replicas = %v, want 3", n)
			}
			containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
			env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			if !slices.ContainsFunc(env, func(e any) bool {
				path, _, _ := unstructured.NestedString(e.(map[string]any), "valueFrom", "fieldRef", "fieldPath")
				return path == "metadata.name"
			}) {
				t.Errorf("no env var carries the Pod's name (the replica's shard ID): %v", env)
			}
			if _, err := helmCommand(ctx, t, "template", chartRelease, chartDir(t), "--set", "mode=standalone", "--set", "replicas=2"); err == nil {
				t.Error("standalone mode with 2 replicas rendered")
			}
			return ctx
		}).
		Assess("standalone mode: restricted pod, Secrets only for the content store of the release namespace", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, localApply := range []string{"broad", "none"} {
				objs := renderChart(ctx, t, "mode=standalone", "rbac.localApply="+localApply)
				args := checkRestricted(t, objs)
				wantArgs(t, "standalone", args, "--cluster-provider=none", "--leader-elect")
				if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--cluster-secret-namespace") }) {
					t.Errorf("standalone args name a cluster Secret namespace: %q", args)
				}
				for _, g := range secretGrants(t, objs) {
					if localApply == "broad" && g.kind == "ClusterRole" && (g.name == chartRelease+"-local-apply" || g.name == chartRelease+"-local-read") {
						continue // the documented broad choice
					}
					if g.kind == "Role" && g.namespace == chartNamespace && !g.wildcard() &&
						slices.Equal(g.verbs, []string{"get", "list", "create", "update", "patch", "delete"}) {
						continue // the content store's chunks; no watch: no Secret is cached
					}
					t.Errorf("standalone, localApply=%s: a rule grants Secrets: %s", localApply, g)
				}
			}
			return ctx
		}).
		Assess("rbac.localApply=none renders no wildcard rule", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, mode := range []string{"hub", "standalone"} {
				for _, g := range grants(t, renderChart(ctx, t, "mode="+mode, "rbac.localApply=none")) {
					if g.wildcard() {
						t.Errorf("%s mode, localApply=none: wildcard rule %s", mode, g)
					}
				}
			}
			// Nothing delivered locally: neither the local-apply nor the KubeVirt rights.
			objs := renderChart(ctx, t, "localCluster.enabled=false")
			wantArgs(t, "hub", checkRestricted(t, objs), "--disable-local-cluster")
			for _, g := range grants(t, objs) {
				if g.wildcard() || slices.Contains(g.apiGroups, "kubevirt.io") {
					t.Errorf("localCluster.enabled=false: rule %s", g)
				}
			}
			// Least privilege by default: no wildcard unless rbac.localApply=broad is chosen.
			for _, g := range grants(t, renderChart(ctx, t)) {
				if g.wildcard() {
					t.Errorf("the default values render a wildcard rule: %s", g)
				}
			}
			var sawWildcard bool
			for _, g := range grants(t, renderChart(ctx, t, "rbac.localApply=broad")) {
				sawWildcard = sawWildcard || g.wildcard()
			}
			if !sawWildcard {
				t.Error("rbac.localApply=broad renders no wildcard rule")
			}
			return ctx
		}).
		Assess("who may deliver where is RBAC: the admission policy, the local ServiceAccount, the users' roles", chartRendersTenancy).
		Assess("values that cannot work together are refused at render time", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, sets := range [][]string{
				{"mode=spoke"}, {"rbac.localApply=some"},
				{"mode=standalone", "infrahub.webhookSecret=hook"}, {"mode=standalone", "localCluster.enabled=false"},
			} {
				args := []string{"template", chartRelease, chartDir(t)}
				for _, s := range sets {
					args = append(args, "--set", s)
				}
				if _, err := helmCommand(ctx, t, args...); err == nil {
					t.Errorf("helm template --set %q succeeded", sets)
				}
			}
			return ctx
		}).
		Feature()

	install := features.New("the operator runs with exactly the rights the chart gives its ServiceAccount").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			hubKubeconfig, err := fleetenv.Fleet(ctx).Hub.WriteKubeconfig(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			// The least-privilege choice: Secrets of the release namespace only. The test
			// environment installed Vidra's CRDs on the hub: the chart leaves them to it.
			installed = true
			t.Log(helmRun(ctx, t, "install", chartRelease, chartDir(t), "--namespace", chartNamespace, "--create-namespace",
				"--kubeconfig", hubKubeconfig, "--wait=false", "--set", "rbac.localApply=none", "--set", "crds.install=false"))
			return ctx
		}).
		Assess("the operator, acting as the chart's ServiceAccount, enrolls the member", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			t.Log(kubectl(ctx, t, nil, "-n", chartNamespace, "get", "serviceaccounts,roles,rolebindings,deployments,services"))
			fleet := fleetenv.Fleet(ctx)
			var err error
			op, err = fleetenv.StartOperator(ctx, "--kubeconfig="+impersonatingKubeconfig(t, fleet.Hub.Kubeconfig),
				"--cluster-secret-namespace="+chartNamespace, "--infrahub-secret-namespace="+chartNamespace,
				"--content-namespace="+chartNamespace, "--content-grace-period=4s", "--leader-elect", "--leader-election-namespace="+chartNamespace, "--hub-id=helm", "--cluster-probe-interval=1s",
				"--local-service-account="+chartNamespace+"/"+chartLocalServiceAccount)
			if err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, clusterName+".kubeconfig", fleet.Members[0].Kubeconfig)
			secretMade = true
			kubectl(ctx, t, nil, "-n", chartNamespace, "create", "secret", "generic", clusterName, "--from-file=kubeconfig="+path)
			kubectl(ctx, t, nil, "-n", chartNamespace, "label", "secret", clusterName, "vidra.infrahub.operators.com/cluster="+clusterName)
			var out string
			testfleet.Eventually(t, 30*time.Second, clusterName+" Engaged", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "vidraclusters")
				return engaged(out, clusterName), nil
			})
			t.Logf("kubectl get vidraclusters:\n%s", out)
			return ctx
		}).
		Assess("a VidraResource delivers a ConfigMap to the member", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			vr := []byte(`apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: ` + vrName + `
spec:
  destination:
    cluster: ` + clusterName + `
    namespace: helm-hello
  manifest: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: greeting
    data:
      text: delivered with the chart's rights
`)
			// An admission policy takes effect once the API server has loaded it, a moment
			// after helm created it: a server-side dry run says when, and creates nothing.
			testfleet.Eventually(t, 30*time.Second, "the chart's finalizer policy in effect", func() (bool, error) {
				return strings.Contains(kubectl(ctx, t, vr, "create", "--dry-run=server", "-f", "-", "-o", "jsonpath={.metadata.finalizers}"), vidrav1alpha1.VidraResourceFinalizer), nil
			})
			vrApplied = true
			created := kubectl(ctx, t, vr, "create", "-f", "-", "-o", "jsonpath={.metadata.finalizers}")
			// The create's own response: the chart's MutatingAdmissionPolicy gave the
			// finalizer, before the operator could.
			if !strings.Contains(created, vidrav1alpha1.VidraResourceFinalizer) {
				t.Errorf("the created VidraResource has finalizers %q, want the chart's policy to add %s", created, vidrav1alpha1.VidraResourceFinalizer)
			}
			var out string
			testfleet.Eventually(t, 30*time.Second, vrName+" Succeeded", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "vidraresources")
				r := row(out, vrName)
				return len(r) >= 3 && r[1] == clusterName && r[2] == "Succeeded", nil
			})
			t.Logf("kubectl get vidraresources:\n%s", out)
			got, err := fleetenv.Fleet(ctx).Members[0].Kubectl(ctx, nil, "-n", "helm-hello", "get", "configmap", "greeting", "-o", "jsonpath={.data.text}")
			if err != nil || got != "delivered with the chart's rights" {
				t.Errorf("ConfigMap on the member: %q, %v", got, err)
			}
			return ctx
		}).
		Assess("a team delivers where RBAC lets it, and is told why elsewhere", teamDelivers(clusterName)).
		Assess("the ServiceAccount reads Secrets in its namespace only", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"get", "secrets", "-n", chartNamespace}, "yes"},
				{[]string{"list", "secrets", "-n", chartNamespace}, "yes"},
				{[]string{"get", "secrets", "-n", "default"}, "no"},
				{[]string{"list", "secrets", "-n", "kube-system"}, "no"},
				{[]string{"list", "secrets", "--all-namespaces"}, "no"},
				// The content store's chunks are Secrets of the release namespace, and renewed
				// tokens are patched into enrollment Secrets; no Secret elsewhere is written.
				{[]string{"create", "secrets", "-n", chartNamespace}, "yes"},
				{[]string{"patch", "secrets", "-n", chartNamespace}, "yes"},
				{[]string{"create", "secrets", "-n", "default"}, "no"},
				{[]string{"patch", "secrets", "-n", "default"}, "no"},
				{[]string{"update", "secrets", "-n", "kube-system"}, "no"},
				{[]string{"delete", "secrets", "-n", "default"}, "no"},
				{[]string{"get", "namespace/kube-system"}, "yes"},
				{[]string{"get", "namespace/default"}, "no"},
				{[]string{"create", "leases.coordination.k8s.io", "-n", chartNamespace}, "yes"},
				{[]string{"create", "leases.coordination.k8s.io", "-n", "default"}, "no"},
				{[]string{"create", "configmaps", "-n", "default"}, "no"},
				{[]string{"create", "configmaps", "-n", chartNamespace}, "yes"},
				{[]string{"delete", "configmaps", "-n", chartNamespace}, "yes"},
			} {
				if got := canI(ctx, t, c.args...); got != c.want {
					t.Errorf("kubectl auth can-i %s --as %s: %q, want %q", strings.Join(c.args, " "), chartSAUser, got, c.want)
				} else {
					t.Logf("can-i %s: %s", strings.Join(c.args, " "), got)
				}
			}
			return ctx
		}).
		Assess("deleting the VidraResource and the Secret releases the ConfigMap and retires the cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "delete", "vidraresource", vrName, "--wait=true", "--timeout=30s")
			vrApplied = false
			if _, err := fleetenv.Fleet(ctx).Members[0].Kubectl(ctx, nil, "-n", "helm-hello", "get", "configmap", "greeting"); err == nil {
				t.Error("deleting the VidraResource left its ConfigMap on the member")
			}
			kubectl(ctx, t, nil, "-n", chartNamespace, "delete", "secret", clusterName)
			secretMade = false
			testfleet.Eventually(t, 30*time.Second, clusterName+" retired", func() (bool, error) {
				return !strings.Contains(kubectl(ctx, t, nil, "get", "vidraclusters", "-o", "name"), clusterName), nil
			})
			return ctx
		}).
		Assess("the operator was never refused anything", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if refused := forbiddenLines(op.Logs()); len(refused) > 0 {
				t.Errorf("the operator was refused a request with the chart's RBAC:\n%s", strings.Join(refused, "\n"))
			}
			return ctx
		}).
		Assess("with rbac.localApply=none, delivering to the local cluster fails with a clear RBAC error, naming the local ServiceAccount", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			localVRApplied = true
			kubectl(ctx, t, []byte(`apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: `+localVRName+`
spec:
  destination:
    namespace: helm-local
  manifest: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: greeting
    data:
      text: not delivered
`), "apply", "-f", "-")
			var lastError string
			testfleet.Eventually(t, 30*time.Second, localVRName+" refused", func() (bool, error) {
				lastError = kubectl(ctx, t, nil, "get", "vidraresource", localVRName, "-o", "jsonpath={.status.lastError}")
				return strings.Contains(lastError, "forbidden"), nil
			})
			t.Logf("status.lastError: %s", lastError)
			// Applied as the chart's local ServiceAccount, which has no right, never as the
			// operator.
			if !strings.Contains(lastError, chartLocalSAUser) {
				t.Errorf("the error does not name the local ServiceAccount %s: %s", chartLocalSAUser, lastError)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// Whatever an assessment left behind, removed while the operator still runs.
			fleet := fleetenv.Fleet(ctx)
			try := func(c *testfleet.Cluster, args ...string) {
				if _, err := c.Kubectl(ctx, nil, args...); err != nil {
					t.Error(err)
				}
			}
			if localVRApplied {
				// Releasing its recorded ConfigMap is refused too, which holds the finalizer:
				// remove it once the operator had its chance.
				try(fleet.Hub, "delete", "vidraresource", localVRName, "--wait=false", "--ignore-not-found")
				if !waitFor(5*time.Second, func() bool {
					_, err := fleet.Hub.Kubectl(ctx, nil, "get", "vidraresource", localVRName)
					return err != nil
				}) {
					try(fleet.Hub, "patch", "vidraresource", localVRName, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
				}
			}
			if vrApplied {
				try(fleet.Hub, "delete", "vidraresource", vrName, "--wait=true", "--timeout=30s", "--ignore-not-found")
			}
			if secretMade {
				try(fleet.Hub, "-n", chartNamespace, "delete", "secret", clusterName, "--ignore-not-found")
				if op != nil && !waitFor(30*time.Second, func() bool {
					out, err := fleet.Hub.Kubectl(ctx, nil, "get", "vidraclusters", "-o", "name")
					return err == nil && !strings.Contains(out, clusterName)
				}) {
					t.Errorf("VidraCluster %s still there 30s after its Secret was deleted", clusterName)
				}
			}
			if op != nil {
				if err := op.Stop(30 * time.Second); err != nil {
					t.Errorf("stop operator: %v", err)
				}
				if t.Failed() || os.Getenv("HELM_TEST_LOGS") != "" {
					t.Logf("operator logs:\n%s", op.Logs())
				}
			}
			if installed {
				hubKubeconfig, err := fleet.Hub.WriteKubeconfig(t.TempDir())
				if err == nil {
					var out string
					out, err = helmCommand(ctx, t, "uninstall", chartRelease, "--namespace", chartNamespace, "--kubeconfig", hubKubeconfig)
					t.Log(out)
				}
				if err != nil {
					t.Error(err)
				}
			}
			return ctx
		}).
		Feature()

	testenv.Test(t, render, install)
}

// teamDelivers: a person who may write VidraResources and deliver to one cluster (a
// ClusterRole an admin writes, as docs/security.md shows) delivers there with kubectl, and
// is refused at kubectl apply for the hub, naming the right.
func teamDelivers(cluster string) func(context.Context, *testing.T, *envconf.Config) context.Context {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		hub := fleetenv.Fleet(ctx).Hub
		const team = "team-web"
		kubectl(ctx, t, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vidra-deliver-`+team+`
rules:
  - apiGroups: ["infrahub.operators.com"]
    resources: ["vidraresources"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  - apiGroups: ["infrahub.operators.com"]
    resources: ["vidraclusters"]
    resourceNames: ["`+cluster+`"]
    verbs: ["deliver"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vidra-deliver-`+team+`
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vidra-deliver-`+team+`
subjects:
  - kind: User
    apiGroup: rbac.authorization.k8s.io
    name: alice
`), "apply", "-f", "-")
		defer kubectl(ctx, t, nil, "delete", "clusterrole,clusterrolebinding", "vidra-deliver-"+team, "--ignore-not-found")
		kubeconfig, err := hub.AddUser("alice")
		if err != nil {
			t.Fatal(err)
		}
		asAlice := "--kubeconfig=" + writeFile(t, "alice.kubeconfig", kubeconfig)
		bundle := func(name, destination string) []byte {
			return []byte(`apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: ` + name + `
spec:
  destination:` + destination + `
    namespace: team-web
  manifest: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: team-web
`)
		}
		if _, err := hub.Kubectl(ctx, bundle("team-web-hub", ""), asAlice, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "alice may not deliver to cluster local") {
			t.Errorf("alice's bundle for the hub: %v, want it refused naming the right", err)
		}
		if _, err := hub.Kubectl(ctx, bundle("team-web", "\n    cluster: "+cluster), asAlice, "apply", "-f", "-"); err != nil {
			t.Fatalf("alice's bundle for %s: %v", cluster, err)
		}
		defer kubectl(ctx, t, nil, "delete", "vidraresource", "team-web", "--wait=true", "--timeout=30s")
		testfleet.Eventually(t, 30*time.Second, "team-web Succeeded", func() (bool, error) {
			r := row(kubectl(ctx, t, nil, "get", "vidraresources"), "team-web")
			return len(r) >= 3 && r[2] == "Succeeded", nil
		})
		return ctx
	}
}

// chartRendersTenancy checks what the chart renders for a hub many teams share: the
// deliver admission policy and its binding, the requester policy where the API server
// serves MutatingAdmissionPolicies, a local ServiceAccount the operator applies local
// bundles as (bound to nothing unless rbac.localApply=broad), and the roles: deliver
// aggregated into none of Kubernetes' own.
func chartRendersTenancy(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	objs := renderChart(ctx, t)
	named := func(kind, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		t.Errorf("no %s %s rendered", kind, name)
		return &unstructured.Unstructured{Object: map[string]any{}}
	}
	named("ValidatingAdmissionPolicy", chartRelease+"-deliver")
	named("ValidatingAdmissionPolicyBinding", chartRelease+"-deliver")
	named("ValidatingAdmissionPolicy", chartRelease+"-clusters")
	named("ValidatingAdmissionPolicyBinding", chartRelease+"-clusters")
	named("ValidatingAdmissionPolicy", chartRelease+"-status")
	named("ValidatingAdmissionPolicyBinding", chartRelease+"-status")
	named("ValidatingAdmissionPolicy", chartRelease+"-alerts")
	named("ValidatingAdmissionPolicyBinding", chartRelease+"-alerts")
	named("ServiceAccount", chartLocalServiceAccount)
	wantArgs(t, "hub", checkRestricted(t, objs), "--local-service-account="+chartNamespace+"/"+chartLocalServiceAccount)
	aggregated := map[string][]string{chartRelease + "-view": {"view", "edit", "admin"}, chartRelease + "-edit": {"edit", "admin"}, chartRelease + "-deliver-everywhere": nil}
	for role, aggregatesTo := range aggregated {
		labels := named("ClusterRole", role).GetLabels()
		for _, to := range []string{"view", "edit", "admin"} {
			if want := slices.Contains(aggregatesTo, to); (labels["rbac.authorization.k8s.io/aggregate-to-"+to] == "true") != want {
				t.Errorf("ClusterRole %s aggregates to %s: %v, want %v", role, to, !want, want)
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			if name, _, _ := unstructured.NestedString(s.(map[string]any), "name"); name == chartLocalServiceAccount {
				t.Errorf("with rbac.localApply=none, %s %s binds the local ServiceAccount", o.GetKind(), o.GetName())
			}
		}
	}
	// The operator may act as the local ServiceAccount, as local delivery needs, and as no
	// other account.
	var impersonates []string
	for _, g := range grants(t, objs) {
		if slices.Contains(g.verbs, "impersonate") || slices.Contains(g.verbs, "*") {
			impersonates = append(impersonates, g.String()+" names "+strings.Join(g.resourceNames, ","))
		}
	}
	want := fmt.Sprintf("Role %s/%s-impersonate: groups [\"\"] resources [\"serviceaccounts\"] verbs [\"impersonate\"] names %s", chartNamespace, chartRelease, chartLocalServiceAccount)
	if !slices.Equal(impersonates, []string{want}) {
		t.Errorf("what the chart lets anyone impersonate: %q, want only %q", impersonates, want)
	}
	withMAP, err := helmCommand(ctx, t, "template", chartRelease, chartDir(t), "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")
	if err != nil || !strings.Contains(withMAP, "name: "+chartRelease+"-deliver-requester") {
		t.Errorf("no requester MutatingAdmissionPolicy where the API server serves them: %v", err)
	}
	return ctx
}
