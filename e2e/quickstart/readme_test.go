package quickstart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
	"github.com/vidra-operator/vidra/internal/test/sopstest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// release is the version the README installs: the test pushes the chart of this tree
// under it, as make release does.
const release = "0.9.0"

// sources serves, over https on loopback, what the README's examples name: the chart and
// an OCI artifact in one registry (for ghcr.io), a Git repository (git.example.com), a Helm
// repository (charts.example.com) and Infrahub (infrahub.example.com).
type sources struct {
	registry *ociregistry.Registry
	git      *gitserver.Server
	helm     *helmrepo.Repo
	infrahub *infrahubtest.Server
	// ageKey opens deploy/db/db.enc.yaml (docs/decryption.md's).
	ageKey *age.X25519Identity
}

const (
	gitPassword   = "s3cret-git"
	infrahubToken = "s3cret-infrahub"
)

// fixture is what the sources serve for one test: its objects are named with suffix, so
// that what one test leaves released on a member is not another's, and the OCI artifact
// is pushed at tag with its manifest under dir, in namespace (none: the sync's).
type fixture struct {
	suffix, tag, dir, namespace string
}

func startSources(t *testing.T, fx fixture) *sources {
	t.Helper()
	s := &sources{
		registry: ociregistry.NewTLS(t),
		git:      gitserver.NewTLS(t),
		helm:     helmrepo.NewRepo(t, helmrepo.WithTLS(), helmrepo.WithPath("/stable")),
	}
	// The README's InfrahubSync reads Infrahub as it was two hours ago: the artifact is
	// put three hours back.
	var past atomic.Bool
	past.Store(true)
	s.infrahub = infrahubtest.New(infrahubtest.Options{TLS: true, Token: infrahubToken, Now: func() time.Time {
		if past.Load() {
			return time.Now().Add(-3 * time.Hour)
		}
		return time.Now()
	}})
	t.Cleanup(s.infrahub.Close)
	s.git.RequireBasicAuth("deployer", gitPassword)
	s.ageKey = sopstest.NewIdentity(t)
	dbSecret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: from-sops\n"
	s.git.Repo(t, "platform/apps").Commit(t, "main", map[string]string{
		"deploy/prod/web.yaml":  configMap("web-git"+fx.suffix, "", "git"),
		"deploy/app/app.yaml":   configMap("web-app", "", "git"), // docs/dependencies.md's
		"deploy/db/db.enc.yaml": string(sopstest.Encrypt(t, []byte(dbSecret), sopstest.SecretValues, s.ageKey.Recipient().String())),
		// As docs/postbuild.md shows it.
		"deploy/settings/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\ndata:\n" +
			"  cluster: ${cluster.name}\n  region: ${cluster.labels.region}\n  team: ${team}\n  logLevel: ${log_level:=info}\n",
	}, "web")
	s.registry.Push(t, "platform/manifests/web", fx.tag, map[string]string{fx.dir + "web.yaml": configMap("web-oci"+fx.suffix, fx.namespace, "oci")})
	s.helm.Add(helmrepo.Chart(t, "ingress-nginx", "4.10.1"))
	s.infrahub.Put("main", infrahubtest.Artifact{ID: "web-1", Name: "Webserver_Manifest", TargetID: "edge-1", TargetLabel: "edge-1", TargetKind: "InfraDevice",
		Content: configMap("webserver"+fx.suffix, "", "infrahub")})
	past.Store(false)
	return s
}

// configMap is a ConfigMap manifest whose data says where it came from.
func configMap(name, namespace, from string) string {
	meta := "  name: " + name + "\n"
	if namespace != "" {
		meta += "  namespace: " + namespace + "\n"
	}
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n" + meta + "data:\n  from: " + from + "\n"
}

func (s *sources) hosts() map[string]string {
	host := func(url string) string { return strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://") }
	return map[string]string{
		"ghcr.io":              s.registry.Host(),
		"git.example.com":      host(s.git.URL()),
		"charts.example.com":   host(strings.TrimSuffix(s.helm.URL(), "/stable")),
		"infrahub.example.com": host(s.infrahub.URL()),
	}
}

// TestTheReadmeWorksAsWritten: every README example that creates objects runs as written,
// in its step, with only the host names replaced: the chart from a registry, a cluster
// enrolled by Secret, by kubectl vidra enroll and in pull mode, a team's role, a bundle,
// and an InfrahubSync, a GitSync, an OCISync and a HelmSync, each delivered.
func TestTheReadmeWorksAsWritten(t *testing.T) {
	scripts := scriptsByStep(t, "../../README.md")
	uninstall := scriptsByStep(t, "../../docs/uninstalling.md")["uninstall"]
	src := startSources(t, fixture{tag: "1.2.0", namespace: "default"})
	var (
		box             *sandbox
		operator, agent *fleetenv.Operator
	)
	f := features.New("README.md, as a user types it").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			edge1 := fleetenv.Fleet(ctx).Members[0]
			t.Cleanup(func() {
				stopAll(t, operator, agent)
				deleteDelivered(context.Background(), t, edge1)
				deleteClusterRBAC(context.Background(), t, fleetenv.Fleet(ctx).Hub.Client, "vidra-deliver-team-web")
			})
			for _, c := range fleetenv.Fleet(ctx).Clusters() {
				waitNamespacesGone(ctx, t, c, "vidra-system")
			}
			waitNamespacesGone(ctx, t, edge1, deliveredNamespaces...)
			pushChart(t, src.registry)
			box = newSandbox(ctx, t, fleetenv.Fleet(ctx), src.hosts(), src.registry.CA(),
				"TOKEN="+gitPassword, "INFRAHUB_TOKEN="+infrahubToken)
			// The operator and the agent trust the loopback servers as the user does.
			t.Setenv("SSL_CERT_FILE", filepath.Join(box.dir, "ca.pem"))
			return ctx
		}).
		Assess("install: the chart from the registry, and the operator it runs", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "install", scripts["install"], 0)
			operator = startChartOperator(ctx, t, box.dir)
			return ctx
		}).
		Assess("enroll-secret: a labeled kubeconfig Secret engages a cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if err := os.WriteFile(filepath.Join(box.dir, "edge-1.kubeconfig"), fleetenv.Fleet(ctx).Members[0].Kubeconfig, 0o600); err != nil {
				t.Fatal(err)
			}
			box.step(ctx, t, "enroll-secret", scripts["enroll-secret"], 0)
			waitEngaged(ctx, t, "edge-1", "Push")
			// The quickstart enrolls edge-1 again with kubectl vidra enroll: unenroll it.
			box.step(ctx, t, "unenroll-secret", []string{"kubectl -n vidra-system delete secret edge-1\n"}, 0)
			waitGone(ctx, t, "edge-1")
			return ctx
		}).
		Assess("enroll, enroll-pull: kubectl vidra enroll, pushed and pulled", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "enroll", scripts["enroll"], 0)
			waitEngaged(ctx, t, "edge-1", "Push")
			waitEngaged(ctx, t, "edge-2", "Push")
			box.step(ctx, t, "enroll-pull", scripts["enroll-pull"], 0)
			agent = startAgent(ctx, t, fleetenv.Fleet(ctx).Members[2], box.dir)
			waitEngaged(ctx, t, "edge-3", "Pull")
			return ctx
		}).
		Assess("team: a role that delivers to two clusters", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := box.step(ctx, t, "team", scripts["team"], 1)
			if !strings.Contains(out, "yes") || !strings.Contains(out, "no") {
				t.Errorf("kubectl vidra can-deliver said neither yes then no:\n%s", out)
			}
			return ctx
		}).
		Assess("deliver, infrahub, git, helm: each delivered to edge-1", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			defer func() {
				if t.Failed() {
					out, _ := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "vidra", "-o", "yaml")
					t.Logf("the fleet, as the hub shows it:\n%s", out)
				}
			}()
			for _, step := range []string{"deliver", "infrahub", "git", "helm"} {
				box.step(ctx, t, step, scripts[step], 0)
			}
			edge1 := fleetenv.Fleet(ctx).Members[0]
			waitData(ctx, t, edge1, "hello", "greeting", "text", "hello")
			waitData(ctx, t, edge1, "web", "webserver", "from", "infrahub")
			waitData(ctx, t, edge1, "web", "web-git", "from", "git")
			waitData(ctx, t, edge1, "default", "web-oci", "from", "oci")
			waitData(ctx, t, edge1, "ingress", "ingress-controller", "nodeSelector", `{"topology.kubernetes.io/region":"eu-west"}`)
			return ctx
		}).
		Assess("uninstall (docs/uninstalling.md): nothing of Vidra's is left, and every delivered object stays", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := box.step(ctx, t, "uninstall", uninstall, 0)
			if !strings.Contains(out, "Nothing of Vidra's is left.") {
				t.Errorf("the last uninstall found something left")
			}
			checkUninstalled(ctx, t, client.ObjectKey{Namespace: "hello", Name: "greeting"}, client.ObjectKey{Namespace: "web", Name: "webserver"},
				client.ObjectKey{Namespace: "web", Name: "web-git"}, client.ObjectKey{Namespace: "default", Name: "web-oci"},
				client.ObjectKey{Namespace: "ingress", Name: "ingress-controller"})
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

func stopAll(t *testing.T, ops ...*fleetenv.Operator) {
	for _, op := range ops {
		if op != nil {
			if err := op.Stop(30 * time.Second); err != nil || t.Failed() {
				t.Logf("stopped (%v):\n%s", err, op.Logs())
			}
		}
	}
}

// waitEngaged waits until kubectl get vidraclusters shows cluster Engaged in mode.
func waitEngaged(ctx context.Context, t *testing.T, cluster, mode string) {
	t.Helper()
	hub := fleetenv.Fleet(ctx).Hub
	testfleet.Poll(t, 200*time.Millisecond, 90*time.Second, cluster+" Engaged, "+mode, func() (bool, error) {
		out, err := hub.Kubectl(ctx, nil, "get", "vidracluster", cluster, "-o", "jsonpath={.status.phase} {.status.mode}")
		return err == nil && out == "Engaged "+mode, nil
	})
}

func waitGone(ctx context.Context, t *testing.T, cluster string) {
	t.Helper()
	hub := fleetenv.Fleet(ctx).Hub
	testfleet.Poll(t, 200*time.Millisecond, 60*time.Second, "VidraCluster "+cluster+" gone", func() (bool, error) {
		out, err := hub.Kubectl(ctx, nil, "get", "vidraclusters", "-o", "name")
		return err == nil && !strings.Contains(out, "/"+cluster+"\n") && !strings.HasSuffix(out, "/"+cluster), nil
	})
}

// waitData waits until ConfigMap namespace/name on member holds value at key.
func waitData(ctx context.Context, t *testing.T, member *testfleet.Cluster, namespace, name, key, value string) {
	t.Helper()
	testfleet.Poll(t, 200*time.Millisecond, 120*time.Second, fmt.Sprintf("ConfigMap %s/%s on %s", namespace, name, member.Name), func() (bool, error) {
		cm := &corev1.ConfigMap{}
		err := member.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
		return err == nil && cm.Data[key] == value, client.IgnoreNotFound(err)
	})
}

// chartArgs are the operator's arguments in the Deployment the chart installed, less
// the listening addresses (free ones are chosen) and the cache directory.
func chartArgs(ctx context.Context, t *testing.T) []string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := fleetenv.Fleet(ctx).Hub.Client.Get(ctx, client.ObjectKey{Namespace: "vidra-system", Name: "vidra"}, d); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(slices.Clone(d.Spec.Template.Spec.Containers[0].Args), func(a string) bool {
		return strings.HasPrefix(a, "--metrics-bind-address=") || strings.HasPrefix(a, "--health-probe-bind-address=") ||
			strings.HasPrefix(a, "--webhook-bind-address=") || strings.HasPrefix(a, "--source-cache-dir=")
	})
}

// checkUninstalled checks that the hub serves no Vidra kind, that no member keeps an
// identity or agent of enrollment, that the hub's namespace of the release is gone, and
// that what was delivered to edge-1 stays, no longer Vidra's.
func checkUninstalled(ctx context.Context, t *testing.T, delivered ...client.ObjectKey) {
	t.Helper()
	fleet := fleetenv.Fleet(ctx)
	testfleet.Poll(t, 200*time.Millisecond, 60*time.Second, "no Vidra CRD on the hub", func() (bool, error) {
		var crds apiextensionsv1.CustomResourceDefinitionList
		err := fleet.Hub.Client.List(ctx, &crds)
		return err == nil && !slices.ContainsFunc(crds.Items, func(c apiextensionsv1.CustomResourceDefinition) bool {
			return c.Spec.Group == vidrav1alpha1.GroupVersion.Group
		}), err
	})
	testfleet.Poll(t, 200*time.Millisecond, 60*time.Second, "namespace vidra-system gone from the hub", func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: "vidra-system"}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	for i, m := range fleet.Members {
		for _, name := range []string{"vidra", "vidra-agent"} {
			sa := &corev1.ServiceAccount{}
			err := m.Client.Get(ctx, client.ObjectKey{Namespace: "vidra-system", Name: name}, sa)
			if !apierrors.IsNotFound(err) && sa.DeletionTimestamp.IsZero() {
				t.Errorf("edge-%d: ServiceAccount vidra-system/%s is still there (%v)", i+1, name, err)
			}
		}
	}
	for _, key := range delivered {
		cm := &corev1.ConfigMap{}
		if err := fleet.Members[0].Client.Get(ctx, key, cm); err != nil {
			t.Errorf("edge-1: ConfigMap %s: %v", key, err)
			continue
		}
		if _, owned := cm.Annotations[vidrav1alpha1.OwnersAnnotation]; owned || cm.Labels[vidrav1alpha1.ManagedByLabel] == vidrav1alpha1.ManagedByValue {
			t.Errorf("edge-1: ConfigMap %s is still Vidra's: %v %v", key, cm.Labels, cm.Annotations)
		}
	}
}
