package quickstart

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// syncPages are the pages of the kinds of sync whose examples run here, each in the step
// of its name.
var syncPages = []string{"gitsync", "ocisync", "infrahubsync"}

// TestTheSyncPagesWorkAsWritten: on a hub installed and a cluster enrolled as the README
// says, the examples of docs/gitsync.md, docs/ocisync.md and docs/infrahubsync.md run as
// written, hosts aside, and each delivers to edge-1; docs/uninstalling.md then takes
// Vidra away again.
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
			t.Cleanup(func() { stopAll(t, operator) })
			// A test before may have uninstalled Vidra: its namespaces go first.
			for _, c := range fleetenv.Fleet(ctx).Clusters() {
				testfleet.Poll(t, 200*time.Millisecond, 60*time.Second, "no namespace vidra-system on "+c.Name, func() (bool, error) {
					err := c.Client.Get(ctx, client.ObjectKey{Name: "vidra-system"}, &corev1.Namespace{})
					return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
				})
			}
			pushChart(t, src.registry)
			box = newSandbox(ctx, t, fleetenv.Fleet(ctx), src.hosts(), src.registry.CA(),
				"TOKEN="+gitPassword, "INFRAHUB_TOKEN="+infrahubToken, "REGISTRY_TOKEN=unused")
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
			for _, page := range syncPages {
				box.step(ctx, t, page, pages[page], 0)
			}
			edge1 := fleetenv.Fleet(ctx).Members[0]
			waitData(ctx, t, edge1, "web", "web-git-docs", "from", "git")
			waitData(ctx, t, edge1, "web", "web-oci-docs", "from", "oci")
			waitData(ctx, t, edge1, "web", "webserver-docs", "from", "infrahub")
			return ctx
		}).
		Assess("uninstalled as docs/uninstalling.md says", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			box.step(ctx, t, "uninstall", uninstall, 0)
			checkUninstalled(ctx, t, client.ObjectKey{Namespace: "web", Name: "web-git-docs"},
				client.ObjectKey{Namespace: "web", Name: "web-oci-docs"}, client.ObjectKey{Namespace: "web", Name: "webserver-docs"})
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
