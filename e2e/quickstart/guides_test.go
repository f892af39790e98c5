package quickstart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// guides are the pages, besides the README and the pages of the kinds of sync, whose
// examples create objects, each read once.
type guides map[string]map[string][]string

func readGuides(t *testing.T) guides {
	g := guides{}
	for _, page := range []string{"docs/releases.md", "docs/kubeconfig-policy.md", "docs/security.md", "docs/pull-mode.md",
		"docs/large-bundles.md", "docs/rollouts.md", "docs/metrics.md", "docs/tracing.md", "docs/uninstalling.md",
		"charts/vidra/README.md", "README.md"} {
		g[page] = scriptsByStep(t, "../../"+page)
	}
	return g
}

// installBytes is about the size of Argo CD's install.yaml, which docs/large-bundles.md
// uploads: over the API server's limit of an object.
const installBytes = 1900 << 10

// TestTheGuidesWorkAsWritten: the examples of docs/ that create objects and are not a
// sync page's run as written, hosts aside, in the order a user meets them: the release
// installed as docs/releases.md says and adopted as the chart's README says; edge-1
// enrolled with copied credentials, with a scoped identity, and with a ServiceAccount
// token (docs/kubeconfig-policy.md, docs/security.md); edge-3 in pull mode, and the
// chart's agent; a bundle over the API server's limit uploaded; a sync in waves; a
// team's role and credentials; the dashboard, alerts and tracing turned on; then
// docs/uninstalling.md.
func TestTheGuidesWorkAsWritten(t *testing.T) {
	pages := readGuides(t)
	src := startSources(t, fixture{suffix: "-guides", tag: "1.6.0", dir: "deploy/"})
	src.infrahub.Put("main", infrahubtest.Artifact{ID: "web-waves", Name: "web", TargetID: "edge-1", TargetLabel: "edge-1",
		TargetKind: "InfraDevice", Content: configMap("web-waves", "", "infrahub")})
	var (
		box             *sandbox
		operator, agent *fleetenv.Operator
	)
	f := features.New("the guides, as a user types them").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			fleet := fleetenv.Fleet(ctx)
			t.Cleanup(func() {
				stopAll(t, operator, agent)
				deleteDelivered(context.Background(), t, fleet.Members[0])
				deleteClusterRBAC(context.Background(), t, fleet.Members[0].Client, "vidra")
				deleteClusterRBAC(context.Background(), t, fleet.Hub.Client, "vidra-deliver-team-web")
			})
			for _, c := range fleet.Clusters() {
				waitNamespacesGone(ctx, t, c, "vidra-system")
			}
			waitNamespacesGone(ctx, t, fleet.Members[0], deliveredNamespaces...)
			pushChart(t, src.registry)
			hosts := src.hosts()
			hosts["edge-1.example.com:6443"] = strings.TrimPrefix(fleet.Members[0].Config.Host, "https://")
			box = newSandbox(ctx, t, fleet, hosts, src.registry.CA(), "INFRAHUB_TOKEN="+infrahubToken)
			box.alias(t, "edge-1-robot", "edge-1-admin")
			writeInstallYAML(t, filepath.Join(box.dir, "install.yaml"))
			installPrometheusRuleCRD(ctx, t, fleet.Hub)
			t.Setenv("SSL_CERT_FILE", filepath.Join(box.dir, "ca.pem"))
			return ctx
		}).
		Assess("install (docs/releases.md), adopted (charts/vidra/README.md)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "install", pages["docs/releases.md"]["install"], 0)
			box.step(ctx, t, "take-ownership", pages["charts/vidra/README.md"]["take-ownership"], 0)
			operator = startChartOperator(ctx, t, box.dir)
			return ctx
		}).
		Assess("edge-1 enrolled three ways (docs/kubeconfig-policy.md, docs/security.md)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "copy-credentials", pages["docs/kubeconfig-policy.md"]["copy-credentials"], 0)
			waitEngaged(ctx, t, "edge-1", "Push")
			box.step(ctx, t, "unenroll", []string{"kubectl -n vidra-system delete secret edge-1\n"}, 0)
			waitGone(ctx, t, "edge-1")
			// Enrolls, shows, and unenrolls.
			out := box.step(ctx, t, "scoped", pages["docs/security.md"]["scoped"], 0)
			if !strings.Contains(out, "kind: ServiceAccount") {
				t.Errorf("enroll --dry-run=client -o yaml showed no ServiceAccount")
			}
			waitGone(ctx, t, "edge-1")
			// Unenroll deleted the namespace it made; enrolling into it again waits until it
			// is gone, as a user told "it is being terminated" would.
			waitNamespacesGone(ctx, t, fleetenv.Fleet(ctx).Members[0], "vidra-system")
			box.step(ctx, t, "service-account-token", pages["docs/kubeconfig-policy.md"]["service-account-token"], 0)
			waitEngaged(ctx, t, "edge-1", "Push")
			return ctx
		}).
		Assess("edge-3 in pull mode (docs/pull-mode.md), and the chart's agent", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			fleet := fleetenv.Fleet(ctx)
			box.step(ctx, t, "pull", pages["docs/pull-mode.md"]["pull"], 0)
			agent = startAgent(ctx, t, fleet.Members[2], box.dir)
			waitEngaged(ctx, t, "edge-3", "Pull")
			box.step(ctx, t, "chart-agent", pages["charts/vidra/README.md"]["chart-agent"], 0)
			d := &appsv1.Deployment{}
			if err := fleet.Members[2].Client.Get(ctx, client.ObjectKey{Namespace: "vidra-system", Name: "vidra"}, d); err != nil {
				t.Fatalf("the chart's agent Deployment on edge-3: %v", err)
			}
			if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--mode=agent") {
				t.Errorf("the chart's agent runs %v", args)
			}
			// Its Deployment is Helm's, as the chart's README says.
			box.step(ctx, t, "chart-agent-uninstall", []string{"helm uninstall vidra --namespace vidra-system --kube-context edge-3-admin\n"}, 0)
			return ctx
		}).
		Assess("a bundle over the API server's limit (docs/large-bundles.md), a sync in waves (docs/rollouts.md)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			edge1 := fleetenv.Fleet(ctx).Members[0]
			box.step(ctx, t, "upload", pages["docs/large-bundles.md"]["upload"], 0)
			waitData(ctx, t, edge1, "argocd", "install-0", "part", "0")
			// The README's credentials, and edge-1 in the canary ring, as the page says.
			box.step(ctx, t, "waves-setup", []string{pages["README.md"]["infrahub"][0], "kubectl -n vidra-system label secret edge-1 ring=canary\n"}, 0)
			box.step(ctx, t, "waves", pages["docs/rollouts.md"]["waves"], 0)
			waitData(ctx, t, edge1, "web", "web-waves", "from", "infrahub")
			return ctx
		}).
		Assess("a team's role and credentials (docs/security.md)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "team-role", pages["docs/security.md"]["team-role"], 0)
			out := box.step(ctx, t, "can-deliver", []string{"kubectl vidra can-deliver edge-1 --as alice --as-group team-web\n"}, 0)
			if !strings.Contains(out, "yes") {
				t.Errorf("team-web may not deliver to edge-1:\n%s", out)
			}
			box.step(ctx, t, "team-credentials", pages["docs/security.md"]["team-credentials"], 0)
			return ctx
		}).
		Assess("dashboard, alerts (docs/metrics.md) and tracing (docs/tracing.md)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "monitoring", pages["docs/metrics.md"]["monitoring"], 0)
			box.step(ctx, t, "tracing", pages["docs/tracing.md"]["tracing"], 0)
			checkMonitoring(ctx, t)
			return ctx
		}).
		Assess("uninstalled as docs/uninstalling.md says", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "uninstall", pages["docs/uninstalling.md"]["uninstall"], 0)
			checkUninstalled(ctx, t, client.ObjectKey{Namespace: "argocd", Name: "install-0"}, client.ObjectKey{Namespace: "web", Name: "web-waves"})
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// checkMonitoring checks that both helm upgrades took: the first's dashboard and alerts
// kept (--reuse-values), the second's tracing set.
func checkMonitoring(ctx context.Context, t *testing.T) {
	t.Helper()
	hub := fleetenv.Fleet(ctx).Hub
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: "vidra-system", Name: "vidra-dashboard"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the dashboard's ConfigMap: %v", err)
	}
	if out, err := hub.Kubectl(ctx, nil, "-n", "vidra-system", "get", "prometheusrules", "-o", "name"); err != nil || strings.TrimSpace(out) == "" {
		t.Errorf("no PrometheusRule (%v): %s", err, out)
	}
	d := &appsv1.Deployment{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: "vidra-system", Name: "vidra"}, d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--otlp-endpoint=http://otel-collector.monitoring:4318") {
		t.Errorf("the operator runs without the OTLP endpoint: %v", c.Args)
	}
	if !slices.Contains(c.Env, corev1.EnvVar{Name: "OTEL_TRACES_SAMPLER_ARG", Value: "0.1"}) {
		t.Errorf("the operator's environment lacks the sampler's: %v", c.Env)
	}
}

// writeInstallYAML writes the user's large bundle: a namespace, and ConfigMaps in it of
// installBytes in all.
func writeInstallYAML(t *testing.T, path string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: argocd\n")
	const parts = 20
	filler := strings.Repeat("x", installBytes/parts)
	for i := range parts {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: install-%d\n  namespace: argocd\ndata:\n  part: %q\n  filler: %s\n", i, fmt.Sprint(i), filler)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// deleteClusterRBAC deletes the ClusterRole and ClusterRoleBinding name that an example
// made on c, which are the user's and no uninstall removes, as a test ends.
func deleteClusterRBAC(ctx context.Context, t *testing.T, c client.Client, name string) {
	for _, obj := range []client.Object{&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{}} {
		obj.SetName(name)
		if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
			t.Errorf("delete %T %s: %v", obj, name, err)
		}
	}
}

// installPrometheusRuleCRD serves the Prometheus Operator's PrometheusRule on hub, as
// kube-prometheus-stack does where docs/metrics.md turns the chart's alerts on, until
// the test ends.
func installPrometheusRuleCRD(ctx context.Context, t *testing.T, hub *testfleet.Cluster) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheusrules.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "prometheusrules", Singular: "prometheusrule", Kind: "PrometheusRule", ListKind: "PrometheusRuleList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := hub.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hub.Client.Delete(context.Background(), crd); err != nil {
			t.Errorf("delete the PrometheusRule CRD: %v", err)
		}
	})
	testfleet.Poll(t, 200*time.Millisecond, 30*time.Second, "PrometheusRule served", func() (bool, error) {
		_, err := hub.Kubectl(ctx, nil, "get", "prometheusrules", "-A")
		return err == nil, nil
	})
}
