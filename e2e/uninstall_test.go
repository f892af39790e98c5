package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const (
	uninstallApp    = "uninstall-app"
	uninstallPrune  = "uninstall-prune"
	uninstallSystem = "vidra-uninstall" // identity and agent namespace on both members
	uninstallPush   = "un-push"         // member 0, enrolled by kubectl vidra enroll
	uninstallPull   = "un-pull"         // member 1, enrolled in pull mode
)

// uninstallSync delivers the repository's deploy/ to the clusters labeled site=site.
func uninstallSync(name, url, site, namespace string) []byte {
	return fmt.Appendf(nil, `apiVersion: infrahub.operators.com/v1alpha1
kind: GitSync
metadata:
  name: %s
spec:
  interval: 1h
  source: {url: %s, insecureAllowHTTP: true, ref: {branch: main}, path: deploy}
  destination:
    clusterSelector: {matchLabels: {site: %s}}
    namespace: %s
`, name, url, site, namespace)
}

// uninstallShared is a VidraResource of its own on the push member that declares one of
// the GitSync's ConfigMaps too: an object of two owners.
const uninstallShared = `apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: uninstall-shared
spec:
  destination: {cluster: un-push, namespace: uninstall-app}
  manifest: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: settings
    data:
      value: "v1"
`

// kubectl vidra uninstall takes Vidra off a live fleet (a GitSync to a push and a pull
// member, an object of two owners) while the operator and the agent run: the hub keeps
// no sync, VidraResource, VidraCluster or enrollment; the members keep no identity, agent
// or Vidra CRD; and every delivered object stays, the same object, no longer Vidra's.
// With --prune-workloads what was delivered goes too, and --crds, once the operator is
// gone, removes Vidra's CRDs from the hub.
func TestUninstallRemovesVidraFromTheFleet(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.Repo(t, "uninstall")
	repo.Commit(t, "main", map[string]string{"deploy/config.yaml": upgradeConfigMaps("v1")}, "v1")
	var (
		operator, agent *fleetenv.Operator
		dir             = t.TempDir()
		before          map[string]types.UID
	)
	keep := features.New("uninstall, leaving the workloads").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			t.Cleanup(func() { stopOperators(t, operator, agent) })
			enrollForUninstall(ctx, t)
			var err error
			if operator, err = fleetenv.StartOperator(ctx, "--kubeconfig="+cfg.KubeconfigFile(), "--cluster-probe-interval=1s"); err != nil {
				t.Fatal(err)
			}
			kubeconfig := agentKubeconfigIn(ctx, t, dir, fleetenv.Fleet(ctx).Members[1], uninstallSystem)
			if agent, err = startAgentIn("", kubeconfig, uninstallSystem); err != nil {
				t.Fatal(err)
			}
			kubectl(ctx, t, uninstallSync("uninstall", repo.URL(), "uninstall", uninstallApp), "apply", "-f", "-")
			kubectl(ctx, t, []byte(uninstallShared), "apply", "-f", "-")
			waitUninstallReady(ctx, t, 3)
			before = uninstallUIDs(ctx, t, uninstallApp, 2)
			return ctx
		}).
		Assess("the hub and both members keep nothing of Vidra's, and every delivered object", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := userPlugin(ctx, t, "uninstall", "--hub-context", "hub", "--agent-namespace", uninstallSystem, "--timeout", "2m",
				"--member-context", uninstallPush+"="+fleetenv.Fleet(ctx).Members[0].Name,
				"--member-context", uninstallPull+"="+fleetenv.Fleet(ctx).Members[1].Name)
			t.Logf("kubectl vidra uninstall:\n%s", out)
			for _, want := range []string{"gitsync/uninstall suspended", "vidraresource/uninstall-shared deleted", "gitsync/uninstall deleted",
				"Left in place:", "3 objects on " + uninstallPush + ", released", "3 objects on " + uninstallPull + ", released", "kubectl vidra uninstall --crds"} {
				if !strings.Contains(out, want) {
					t.Errorf("the report does not say %q", want)
				}
			}
			checkHubEmpty(ctx, t)
			checkMembersEmpty(ctx, t)
			after := uninstallUIDs(ctx, t, uninstallApp, 2)
			for object, uid := range before {
				if after[object] != uid {
					t.Errorf("%s was %s before the uninstall and is %q after", object, uid, after[object])
				}
			}
			checkNotVidras(ctx, t, uninstallApp, 2)
			stopOperators(t, operator, agent)
			operator, agent = nil, nil
			return ctx
		}).
		Feature()
	prune := features.New("uninstall --prune-workloads, then --crds").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			t.Cleanup(func() { reinstallHubCRDs(context.Background(), t, fleetenv.Fleet(ctx)) })
			if _, err := fleetenv.Fleet(ctx).Members[0].Kubectl(ctx, nil, "create", "namespace", uninstallPrune); err != nil {
				t.Fatal(err)
			}
			enrollMembers(ctx, t, []string{uninstallPush}, "site=uninstall-prune")
			var err error
			if operator, err = fleetenv.StartOperator(ctx, "--kubeconfig="+cfg.KubeconfigFile(), "--cluster-probe-interval=1s"); err != nil {
				t.Fatal(err)
			}
			kubectl(ctx, t, uninstallSync("uninstall-prune", repo.URL(), "uninstall-prune", uninstallPrune), "apply", "-f", "-")
			waitUninstallReady(ctx, t, 1)
			return ctx
		}).
		Assess("what Vidra delivered goes with it, and then its CRDs", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := userPlugin(ctx, t, "uninstall", "--hub-context", "hub", "--prune-workloads", "--timeout", "2m")
			t.Logf("kubectl vidra uninstall --prune-workloads:\n%s", out)
			if !strings.Contains(out, "on "+uninstallPush+": the credentials secret "+uninstallPush+" held (copied") {
				t.Errorf("the report does not say that the copied credentials stay valid")
			}
			if got := uninstallUIDs(ctx, t, uninstallPrune, 1); len(got) != 0 {
				t.Errorf("left on the member: %v, want nothing", got)
			}
			checkHubEmpty(ctx, t)
			// helm uninstall, here: the operator stops.
			stopOperators(t, operator)
			operator = nil
			out = userPlugin(ctx, t, "uninstall", "--hub-context", "hub", "--crds")
			t.Logf("kubectl vidra uninstall --crds:\n%s", out)
			var crds apiextensionsv1.CustomResourceDefinitionList
			if err := fleetenv.Fleet(ctx).Hub.Client.List(ctx, &crds); err != nil {
				t.Fatal(err)
			}
			for _, crd := range crds.Items {
				if crd.Spec.Group == vidrav1alpha1.GroupVersion.Group && crd.DeletionTimestamp.IsZero() {
					t.Errorf("CRD %s is still on the hub", crd.Name)
				}
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, keep, prune)
}

// enrollForUninstall enrolls member 0 with kubectl vidra enroll (a scoped identity) and
// member 1 in pull mode, both labeled site=uninstall; each gets the app's namespace.
func enrollForUninstall(ctx context.Context, t *testing.T) {
	fleet := fleetenv.Fleet(ctx)
	for _, m := range fleet.Members[:2] {
		if _, err := m.Kubectl(ctx, nil, "create", "namespace", uninstallApp); err != nil {
			t.Fatal(err)
		}
	}
	sa := uninstallSystem + "/vidra"
	t.Log(userPlugin(ctx, t, "enroll", uninstallPush, "--context", fleet.Members[0].Name, "--hub-context", "hub",
		"--namespaces", uninstallApp, "--labels", "site=uninstall", "--service-account", sa))
	t.Log(userPlugin(ctx, t, "enroll", uninstallPull, "--pull", "--context", fleet.Members[1].Name, "--hub-context", "hub",
		"--install-agent=false", "--namespaces", uninstallApp, "--labels", "site=uninstall",
		"--agent-namespace", uninstallSystem, "--service-account", sa))
}

// waitUninstallReady waits until every VidraResource on the hub is Ready.
func waitUninstallReady(ctx context.Context, t *testing.T, want int) {
	t.Helper()
	hub := fleetenv.Fleet(ctx).Hub.Client
	testfleet.Poll(t, 100*time.Millisecond, 90*time.Second, "every VidraResource Ready", func() (bool, error) {
		var list vidrav1alpha1.VidraResourceList
		if err := hub.List(ctx, &list); err != nil {
			return false, err
		}
		ready := 0
		for _, vr := range list.Items {
			if meta.IsStatusConditionTrue(vr.Status.Conditions, vidrav1alpha1.ConditionReady) {
				ready++
			}
		}
		return len(list.Items) >= want && ready == len(list.Items), nil
	})
}
