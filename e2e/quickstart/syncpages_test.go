package quickstart

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// syncPages are the pages of the kinds of sync whose examples run here, each in the step
// of its name.
var syncPages = []string{"gitsync", "ocisync", "infrahubsync", "helmsync", "postbuild", "dependencies", "decryption"}

// TestTheSyncPagesWorkAsWritten: on a hub installed and a cluster enrolled as the README
// says, the examples of docs/gitsync.md, docs/ocisync.md, docs/infrahubsync.md,
// docs/helmsync.md, docs/postbuild.md, docs/dependencies.md and docs/decryption.md run
// as written, hosts (and the age key, which the fixture's makes) aside, and each delivers
// to edge-1;
// docs/uninstalling.md then takes Vidra away again.
func TestTheSyncPagesWorkAsWritten(t *testing.T) {
	readme := scriptsByStep(t, "../../README.md")
	pages := map[string][]string{}
	for _, page := range syncPages {
		pages[page] = scriptsByStep(t, "../../docs/"+page+".md")[page]
	}
	uninstall := scriptsByStep(t, "../../docs/uninstalling.md")["uninstall"]
	src := startSources(t, fixture{suffix: "-docs", tag: "1.4.0", dir: "deploy/"})
	var (
		box      *sandbox
		operator *fleetenv.Operator
	)
	f := features.New("the pages of the kinds of sync, as a user types them").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			edge1 := fleetenv.Fleet(ctx).Members[0]
			t.Cleanup(func() {
				stopAll(t, operator)
				deleteDelivered(context.Background(), t, edge1)
			})
			// A test before may have uninstalled Vidra, and removed what it delivered: those
			// namespaces go first.
			for _, c := range fleetenv.Fleet(ctx).Clusters() {
				waitNamespacesGone(ctx, t, c, "vidra-system")
			}
			waitNamespacesGone(ctx, t, fleetenv.Fleet(ctx).Members[0], deliveredNamespaces...)
			pushChart(t, src.registry)
			box = newSandbox(ctx, t, fleetenv.Fleet(ctx), src.hosts(), src.registry.CA(),
				"TOKEN="+gitPassword, "INFRAHUB_TOKEN="+infrahubToken, "REGISTRY_TOKEN=unused", "CHART_TOKEN=unused")
			t.Setenv("SSL_CERT_FILE", filepath.Join(box.dir, "ca.pem"))
			return ctx
		}).
		Assess("installed and enrolled as the README says", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "install", readme["install"], 0)
			operator = startChartOperator(ctx, t, box.dir)
			box.step(ctx, t, "enroll", readme["enroll"], 0)
			waitEngaged(ctx, t, "edge-1", "Push")
			return ctx
		}).
		Assess("each page's sync delivers to edge-1", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// As age-keygen -o fleet.agekey writes it.
			if err := os.WriteFile(filepath.Join(box.dir, "fleet.agekey"), []byte(src.ageKey.String()+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, page := range syncPages {
				box.step(ctx, t, page, pages[page], 0)
			}
			edge1 := fleetenv.Fleet(ctx).Members[0]
			waitData(ctx, t, edge1, "web", "web-git-docs", "from", "git")
			waitData(ctx, t, edge1, "web", "web-oci-docs", "from", "oci")
			waitData(ctx, t, edge1, "web", "webserver-docs", "from", "infrahub")
			waitData(ctx, t, edge1, "ingress", "ingress-controller", "nodeSelector", `{"topology.kubernetes.io/region":"eu-west"}`)
			for key, want := range map[string]string{"cluster": "edge-1", "region": "eu-west", "team": "platform", "logLevel": "debug"} {
				waitData(ctx, t, edge1, "web", "web-settings", key, want)
			}
			waitData(ctx, t, edge1, "web", "web-app", "from", "git") // once HelmSync ingress is Ready there
			testfleet.Poll(t, 200*time.Millisecond, 60*time.Second, "Secret db/db decrypted on edge-1", func() (bool, error) {
				secret := &corev1.Secret{}
				err := edge1.Client.Get(ctx, client.ObjectKey{Namespace: "db", Name: "db"}, secret)
				return err == nil && string(secret.Data["password"]) == "from-sops", client.IgnoreNotFound(err)
			})
			return ctx
		}).
		Assess("uninstalled as docs/uninstalling.md says", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "uninstall", uninstall, 0)
			checkUninstalled(ctx, t, client.ObjectKey{Namespace: "web", Name: "web-git-docs"},
				client.ObjectKey{Namespace: "web", Name: "web-oci-docs"}, client.ObjectKey{Namespace: "web", Name: "webserver-docs"},
				client.ObjectKey{Namespace: "ingress", Name: "ingress-controller"}, client.ObjectKey{Namespace: "web", Name: "web-settings"},
				client.ObjectKey{Namespace: "web", Name: "web-app"})
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// deliveredNamespaces are where the examples deliver on edge-1, or make namespaces
// there: each test deletes them as it ends, after its uninstall released what they hold.
var deliveredNamespaces = []string{"hello", "web", "ingress", "argocd", "db", "vidra"}

// waitNamespacesGone waits until c has none of the namespaces.
func waitNamespacesGone(ctx context.Context, t *testing.T, c *testfleet.Cluster, names ...string) {
	t.Helper()
	for _, name := range names {
		testfleet.Poll(t, 200*time.Millisecond, 60*time.Second, "no namespace "+name+" on "+c.Name, func() (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
}

// deleteDelivered deletes, as a test ends, the namespaces its examples delivered into on
// edge-1, and what they hold, so that the next test meets none of it.
func deleteDelivered(ctx context.Context, t *testing.T, edge1 *testfleet.Cluster) {
	for _, name := range deliveredNamespaces {
		if err := client.IgnoreNotFound(edge1.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})); err != nil {
			t.Errorf("delete namespace %s on edge-1: %v", name, err)
		}
	}
	if err := client.IgnoreNotFound(edge1.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-oci"}})); err != nil {
		t.Errorf("delete ConfigMap default/web-oci on edge-1: %v", err)
	}
}
