package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// pluginExit runs kubectl vidra and returns its output and exit code.
func pluginExit(ctx context.Context, t *testing.T, args ...string) (string, int) {
	t.Helper()
	binary, err := fleetenv.PluginBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := fleetenv.Fleet(ctx).Hub.WriteKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, binary, append(args, "--kubeconfig="+kubeconfig)...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

// rolloutArtifact renders the site's artifact at version; broken adds a Deployment that
// never becomes Available (nothing runs pods here).
func rolloutArtifact(version string, broken bool) infrahubtest.Artifact {
	content := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: rollout\ndata:\n  version: %q\n", version)
	if broken {
		content += "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: rollout\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: registry.invalid/web:1}]\n"
	}
	return infrahubtest.Artifact{ID: "web-artifact", Name: "web", TargetLabel: "site-1", DefinitionName: "web", Content: content}
}

const rolloutSync = `apiVersion: infrahub.operators.com/v1alpha1
kind: InfrahubSync
metadata:
  name: web
  # Who asked, which the chart's admission policy records; this hub runs without the chart.
  annotations:
    vidra.infrahub.operators.com/requested-by: default
    vidra.infrahub.operators.com/requested-by-groups: system:masters
spec:
  interval: 1h
  source:
    infrahubAPIURL: %s
    artefactName: web
    credentialsSecretRef: {namespace: vidra-system, name: infrahub-rollout}
    insecureAllowHTTP: true
  destination:
    namespace: rollout
    clusterSelector:
      matchExpressions: [{key: ring, operator: Exists}]
  rollout:
    strategy: Progressive
    waves:
    - name: canary
      clusterSelector: {matchLabels: {ring: canary}}
      pauseAfter: 8s
    - name: prod
      clusterSelector: {matchLabels: {ring: prod}}
    maxUnavailable: 1
    healthTimeout: 15s
    onFailure: Pause
`

// TestProgressiveRolloutEndToEnd: a user rolls Infrahub changes across two waves with the
// real operator and kubectl vidra: the canary first, the operator killed mid-rollout and
// started again (the prod wave follows, the canary is not updated twice), a revision that
// cannot become healthy stops at the canary with the prod wave's preview shown by
// kubectl vidra diff, a rollback pins the sync, and resume delivers the next revision.
func TestProgressiveRolloutEndToEnd(t *testing.T) {
	var s *infrahubtest.Server
	var op *fleetenv.Operator
	version := func(ctx context.Context, member int) string {
		out, _ := fleetenv.Fleet(ctx).Members[member].Kubectl(ctx, nil, "-n", "rollout", "get", "configmap", "web", "-o", "jsonpath={.data.version}")
		return out
	}
	waitVersion := func(ctx context.Context, t *testing.T, member int, want string) {
		t.Helper()
		testfleet.Eventually(t, 90*time.Second, fmt.Sprintf("version %s on member %d", want, member), func() (bool, error) {
			return version(ctx, member) == want, nil
		})
	}
	waitPhase := func(ctx context.Context, t *testing.T, want string) string {
		t.Helper()
		var out string
		testfleet.Eventually(t, 90*time.Second, "rollout "+want, func() (bool, error) {
			out, _ = pluginExit(ctx, t, "rollout", "status", "web")
			return strings.Contains(out, want), nil
		})
		return out
	}
	requestSync := func(ctx context.Context, t *testing.T) {
		kubectl(ctx, t, nil, "annotate", "infrahubsync", "web", "--overwrite", "vidra.infrahub.operators.com/requested-at="+time.Now().Format(time.RFC3339Nano))
	}
	canaryVR := func(ctx context.Context, t *testing.T) string {
		return kubectl(ctx, t, nil, "get", "vidraresources", "-l", "vidra.infrahub.operators.com/infrahubsync=web",
			"-o", `jsonpath={range .items[?(@.spec.destination.cluster=="edge-canary")]}{.metadata.generation} {.metadata.annotations.vidra\.infrahub\.operators\.com/rollout-updated-at}{end}`)
	}

	feature := features.New("a change rolls across two waves then stops when it fails and rolls back and resumes").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			s = infrahubtest.New(infrahubtest.Options{Token: "rollout-token"})
			t.Cleanup(s.Close)
			s.Put("main", rolloutArtifact("1", false))
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-rollout", "--from-literal=apiToken=rollout-token")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "annotate", "secret", "infrahub-rollout", "vidra.infrahub.operators.com/allowed-urls="+s.URL())
			for i, ring := range []string{"canary", "prod"} {
				name := "edge-" + ring
				path := writeFile(t, name+".kubeconfig", fleetenv.Fleet(ctx).Members[i].Kubeconfig)
				kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", name, "--from-file=kubeconfig="+path)
				kubectl(ctx, t, nil, "-n", operatorNamespace, "label", "secret", name, "vidra.infrahub.operators.com/cluster="+name, "ring="+ring)
			}
			var err error
			op, err = fleetenv.StartOperator(ctx, "--kubeconfig="+cfg.KubeconfigFile(), "--hub-id=e2e")
			if err != nil {
				t.Fatal(err)
			}
			// Both clusters enrolled first, as a user would see them before rolling out: a
			// canary that enrolls later joins a revision already completed, and gets it then.
			testfleet.Eventually(t, 30*time.Second, "edge-canary and edge-prod Engaged", func() (bool, error) {
				return engaged(kubectl(ctx, t, nil, "get", "vidraclusters"), "edge-canary", "edge-prod"), nil
			})
			return ctx
		}).
		Assess("revision 1 reaches the canary, then prod", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, fmt.Appendf(nil, rolloutSync, s.URL()), "apply", "-f", "-")
			out := waitPhase(ctx, t, "revision 1 Completed")
			t.Logf("kubectl vidra rollout status web:\n%s", out)
			if !strings.Contains(out, "2 of 2 clusters updated") {
				t.Errorf("revision 1 did not complete on both clusters:\n%s", out)
			}
			// The first revision, too, reached the canary first.
			events := kubectl(ctx, t, nil, "get", "events", "--field-selector", "reason=WaveCompleted", "-o", "jsonpath={.items[*].message}")
			if !strings.Contains(events, "revision 1: wave canary healthy") {
				t.Errorf("no WaveCompleted Event for the canary of revision 1: %q", events)
			}
			waitVersion(ctx, t, 0, "1")
			waitVersion(ctx, t, 1, "1")
			return ctx
		}).
		Assess("the operator is killed during the canary's pause; started again, prod follows and the canary is not updated twice", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			s.Put("main", rolloutArtifact("2", false))
			requestSync(ctx, t)
			waitVersion(ctx, t, 0, "2")
			testfleet.Eventually(t, 60*time.Second, "the canary wave healthy, prod waiting", func() (bool, error) {
				out, _ := pluginExit(ctx, t, "rollout", "status", "web")
				return strings.Contains(out, "wave canary healthy; the next starts in"), nil
			})
			before := canaryVR(ctx, t)
			op.Kill()
			if version(ctx, 1) != "1" {
				t.Fatal("prod was updated during the canary's pauseAfter")
			}
			var err error
			op, err = fleetenv.StartOperator(ctx, "--kubeconfig="+cfg.KubeconfigFile(), "--hub-id=e2e")
			if err != nil {
				t.Fatal(err)
			}
			waitPhase(ctx, t, "revision 2 Completed")
			waitVersion(ctx, t, 1, "2")
			if after := canaryVR(ctx, t); after != before {
				t.Errorf("the canary's VidraResource was written again across the restart: %q, then %q", before, after)
			}
			out, code := pluginExit(ctx, t, "history", "ihs/web")
			if code != 0 || !strings.Contains(out, "revision 2, Completed") {
				t.Errorf("kubectl vidra history ihs/web (exit %d):\n%s", code, out)
			}
			t.Logf("kubectl vidra history ihs/web:\n%s", out)
			return ctx
		}).
		Assess("revision 3 never becomes healthy: the rollout stops at the canary; diff shows what waits for prod", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Put("main", rolloutArtifact("3", true))
			requestSync(ctx, t)
			out := waitPhase(ctx, t, "revision 3 Failed at wave canary")
			if !strings.Contains(out, "Failed clusters: edge-canary") {
				t.Errorf("kubectl vidra rollout status web:\n%s", out)
			}
			if version(ctx, 1) != "2" {
				t.Error("the prod wave received the failed revision")
			}
			testfleet.Eventually(t, 30*time.Second, "a RolloutFailed Event", func() (bool, error) {
				events := kubectl(ctx, t, nil, "get", "events", "--field-selector", "reason=RolloutFailed", "-o", "jsonpath={.items[*].message}")
				return strings.Contains(events, "revision 3: wave canary: not healthy within"), nil
			})
			testfleet.Eventually(t, 60*time.Second, "the preview of revision 3 for prod", func() (bool, error) {
				out, code := pluginExit(ctx, t, "diff", "ihs/web")
				return code == 1 && strings.Contains(out, "(cluster edge-prod), revision 3: 1 to create, 1 to update") &&
					strings.Contains(out, "+ create Deployment rollout/web") && strings.Contains(out, `+  version: "3"`), nil
			})
			out, _ = pluginExit(ctx, t, "diff", "ihs/web")
			t.Logf("kubectl vidra diff ihs/web:\n%s", out)
			return ctx
		}).
		Assess("kubectl vidra rollback pins revision 2; a newer listing does not undo it; resume delivers revision 4", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out, code := pluginExit(ctx, t, "rollback", "ihs/web")
			if code != 0 || !strings.Contains(out, "rolled back to its revision 2") {
				t.Fatalf("kubectl vidra rollback ihs/web (exit %d):\n%s", code, out)
			}
			waitVersion(ctx, t, 0, "2")
			s.Put("main", rolloutArtifact("4", false))
			requestSync(ctx, t)
			testfleet.Eventually(t, 60*time.Second, "revision 4 held by the pinned clusters", func() (bool, error) {
				out, _ := pluginExit(ctx, t, "rollout", "status", "web")
				return strings.Contains(out, "revision 4 Progressing at wave canary") && strings.Contains(out, "pinned by a rollback"), nil
			})
			if version(ctx, 0) != "2" || version(ctx, 1) != "2" {
				t.Fatalf("a listing undid the rollback: versions %s and %s", version(ctx, 0), version(ctx, 1))
			}
			out, code = pluginExit(ctx, t, "rollout", "resume", "web")
			if code != 0 {
				t.Fatalf("kubectl vidra rollout resume web (exit %d):\n%s", code, out)
			}
			waitPhase(ctx, t, "revision 4 Completed")
			waitVersion(ctx, t, 0, "4")
			waitVersion(ctx, t, 1, "4")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// No garbage collector here: the VidraResources go while the operator runs.
			kubectl(ctx, t, nil, "delete", "infrahubsync", "web", "--ignore-not-found")
			kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/infrahubsync=web", "--timeout=60s")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "infrahub-rollout", "edge-canary", "edge-prod")
			if op != nil {
				if err := op.Stop(30 * time.Second); err != nil {
					t.Errorf("stop operator: %v", err)
				}
				if t.Failed() {
					t.Logf("operator logs:\n%s", op.Logs())
				}
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}
