package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// upgradeFrom is the commit whose operator the upgrade replaces: the last before the
// VidraResources' bundle annotations were renamed (a060218), which an upgrade must carry
// over without a write to what they delivered.
const upgradeFrom = "46b06e7"

const (
	upgradeNamespace = "upgrade-app"
	// upgradeSystem is the pull member's agent namespace and the home of its identity:
	// the suites before leave vidra-system terminating there after their unenroll.
	upgradeSystem = "vidra-upgrade"
	upgradePush   = "up-canary" // member 0, enrolled by a kubeconfig Secret
	upgradePull   = "up-prod"   // member 1, enrolled in pull mode
)

func upgradeConfigMaps(value string) string {
	var b strings.Builder
	for _, name := range []string{"settings", "routes", "limits"} {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
	}
	return b.String()
}

// An upgrade keeps everything delivered: the operator and the pull member's agent of an
// earlier commit deliver a GitSync in two waves, one to a push member and one to a pull
// member; both are replaced by this build, which takes over every VidraResource and
// delivered object as it finds them: none deleted or re-created, none written more than
// once.
func TestAnUpgradeKeepsEveryDeliveredObject(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.Repo(t, "upgrade")
	repo.Commit(t, "main", map[string]string{"deploy/config.yaml": upgradeConfigMaps("v1")}, "v1")
	var (
		old             string // the earlier operator binary
		dir             = t.TempDir()
		operator, agent *fleetenv.Operator
		writes          *writeCounter
		before          map[string]types.UID
	)
	f := features.New("an upgrade of the operator and the agent").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// A cleanup, not a Teardown: it runs after a failed step too, and leaves no
			// enrollment to the suites that follow.
			fleet := fleetenv.Fleet(ctx)
			t.Cleanup(func() {
				if writes != nil {
					_, _ = writes.stop()
				}
				cleanUpUpgrade(context.Background(), t, fleet)
				stopOperators(t, operator, agent)
			})
			old = buildOperatorAt(ctx, t, upgradeFrom)
			enrollForUpgrade(ctx, t)
			var err error
			if operator, err = fleetenv.StartBinary(old, "--kubeconfig="+cfg.KubeconfigFile(), "--cluster-probe-interval=1s"); err != nil {
				t.Fatal(err)
			}
			if agent, err = startAgentBinary(old, agentKubeconfigIn(ctx, t, dir, fleetenv.Fleet(ctx).Members[1], upgradeSystem)); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the earlier operator delivers the GitSync in its two waves", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, []byte(upgradeGitSync(repo.URL())), "apply", "-f", "-")
			waitUpgradeReady(ctx, t)
			before = upgradeUIDs(ctx, t)
			writes = countWrites(ctx, t)
			return ctx
		}).
		Assess("this build takes over: nothing deleted, re-created, or written twice", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			stopOperators(t, operator, agent)
			var err error
			if operator, err = fleetenv.StartOperator(ctx, "--kubeconfig="+cfg.KubeconfigFile(), "--cluster-probe-interval=1s"); err != nil {
				t.Fatal(err)
			}
			if agent, err = startAgentBinary("", agentKubeconfigIn(ctx, t, dir, fleetenv.Fleet(ctx).Members[1], upgradeSystem)); err != nil {
				t.Fatal(err)
			}
			waitReconciled(ctx, t, operator, agent)
			waitUpgradeReady(ctx, t)
			counts, err := writes.stop()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("writes after the upgrade: %v", counts)
			for object, n := range counts {
				if n.added+n.deleted > 0 || n.modified > 1 {
					t.Errorf("%s: %d added, %d deleted, %d modified since the upgrade; want none, none, at most one", object, n.added, n.deleted, n.modified)
				}
			}
			after := upgradeUIDs(ctx, t)
			for object, uid := range before {
				if after[object] != uid {
					t.Errorf("%s was %s before the upgrade and is %q after", object, uid, after[object])
				}
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

func upgradeGitSync(url string) string {
	return fmt.Sprintf(`apiVersion: infrahub.operators.com/v1alpha1
kind: GitSync
metadata:
  name: upgrade
spec:
  interval: 1h
  source:
    url: %s
    insecureAllowHTTP: true
    ref: {branch: main}
    path: deploy
  destination:
    clusterSelector: {matchLabels: {site: upgrade}}
    namespace: %s
  rollout:
    strategy: Progressive
    waves:
    - name: canary
      clusterSelector: {matchLabels: {ring: canary}}
    - name: prod
      clusterSelector: {matchLabels: {ring: prod}}
`, url, upgradeNamespace)
}

// stopOperators stops each operator that runs, showing its logs when it stopped badly
// or the test failed.
func stopOperators(t *testing.T, ops ...*fleetenv.Operator) {
	for _, op := range ops {
		if op != nil {
			if err := op.Stop(30 * time.Second); err != nil || t.Failed() {
				t.Logf("stopped (%v):\n%s", err, op.Logs())
			}
		}
	}
}

// buildOperatorAt builds the operator of an earlier commit, from the repository's history.
func buildOperatorAt(ctx context.Context, t *testing.T, commit string) string {
	t.Helper()
	root, err := testfleet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(t.TempDir(), "vidra")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binary,
		"-ldflags", "-X github.com/vidra-operator/vidra/internal/version.version="+commit, "./cmd/vidra")
	build.Dir = treeAt(ctx, t, root, commit)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the operator of %s: %v: %s", commit, err, out)
	}
	return binary
}

// startAgentBinary runs the pull member's agent: binary, or this build's when empty.
func startAgentBinary(binary, kubeconfig string) (*fleetenv.Operator, error) {
	return startAgentIn(binary, kubeconfig, upgradeSystem)
}

// startAgentIn is startAgentBinary for an agent in namespace.
func startAgentIn(binary, kubeconfig, namespace string) (*fleetenv.Operator, error) {
	args := []string{"--mode=agent", "--kubeconfig=" + kubeconfig, "--agent-namespace=" + namespace, "--agent-heartbeat=1s"}
	if binary == "" {
		return fleetenv.StartOperator(context.Background(), args...)
	}
	return fleetenv.StartBinary(binary, args...)
}

// enrollForUpgrade enrolls member 0 by a labeled kubeconfig Secret, in the canary ring,
// and member 1 in pull mode, in the prod ring; each gets the app's namespace.
func enrollForUpgrade(ctx context.Context, t *testing.T) {
	fleet := fleetenv.Fleet(ctx)
	for _, m := range fleet.Members[:2] {
		if _, err := m.Kubectl(ctx, nil, "create", "namespace", upgradeNamespace); err != nil {
			t.Fatal(err)
		}
	}
	enrollMembers(ctx, t, []string{upgradePush}, "site=upgrade", "ring=canary")
	t.Log(userPlugin(ctx, t, "enroll", upgradePull, "--pull", "--context", fleet.Members[1].Name, "--hub-context", "hub",
		"--install-agent=false", "--namespaces", upgradeNamespace, "--labels", "site=upgrade,ring=prod",
		"--agent-namespace", upgradeSystem, "--service-account", upgradeSystem+"/vidra"))
}

// waitUpgradeReady waits until both members hold the bundle and its VidraResources are
// Ready.
func waitUpgradeReady(ctx context.Context, t *testing.T) {
	t.Helper()
	for i := range 2 {
		member := fleetenv.Fleet(ctx).Members[i]
		testfleet.Poll(t, 100*time.Millisecond, 90*time.Second, fmt.Sprintf("the bundle on member %d", i), func() (bool, error) {
			out, err := member.Kubectl(ctx, nil, "get", "configmaps", "-n", upgradeNamespace, "-o", "jsonpath={.items[*].data.value}")
			return err == nil && out == "v1 v1 v1", nil
		})
	}
	kubectl(ctx, t, nil, "wait", "--for=condition=Ready", "vidraresources", "-l", "vidra.infrahub.operators.com/gitsync=upgrade", "--timeout=90s")
}
