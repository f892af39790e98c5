package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/kubevirtsim"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

type simulatorKey struct{}

// vmBundle is a VidraResource of four VMs whose memory is memory, rolled out one at a
// time.
func vmBundle(memory string) []byte {
	var docs []string
	for i := range 4 {
		docs = append(docs, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm-%d}
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        devices: {}
        resources: {requests: {memory: %s}}`, i, memory))
	}
	manifest := strings.ReplaceAll(strings.Join(docs, "\n---\n"), "\n", "\n    ")
	return []byte(`apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata: {name: vms}
spec:
  destination: {cluster: kv-1, namespace: vms, reconcileOnEvents: true}
  vmRollout: {strategy: Rolling, maxUnavailable: 1}
  manifest: |
    ` + manifest + "\n")
}

func TestKilledOperatorResumesTheVMRolloutWithoutRestartingAVMTwice(t *testing.T) {
	feature := features.New("the operator is SIGKILLed in the middle of a VM rollout and started again").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			member := fleetenv.Fleet(ctx).Members[0]
			log, err := testfleet.Logger()
			if err != nil {
				t.Fatal(err)
			}
			sim, err := kubevirtsim.New(member.Config, kubevirtsim.Options{Log: log.WithName("kubevirt")})
			if err != nil {
				t.Fatal(err)
			}
			simCtx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go sim.Run(simCtx)
			path := writeFile(t, "kv-1.kubeconfig", member.Kubeconfig)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "kv-1", "--from-file=kubeconfig="+path)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "label", "secret", "kv-1", "vidra.infrahub.operators.com/cluster=kv-1")
			return context.WithValue(ctx, simulatorKey{}, sim)
		}).
		Setup(startOperator("vms", "--hub-id=e2e")).
		Assess("VMs restarted once each across a SIGKILL", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sim := ctx.Value(simulatorKey{}).(*kubevirtsim.Simulator)
			kubectl(ctx, t, vmBundle("64Mi"), "apply", "-f", "-")
			defer func() {
				if t.Failed() {
					t.Logf("VidraResource:\n%s\noperator logs:\n%s", kubectl(ctx, t, nil, "get", "vidraresource", "vms", "-o", "yaml"), operatorFrom(ctx, "vms").Logs())
				}
			}()
			testfleet.Eventually(t, 60*time.Second, "VM rollout Completed", func() (bool, error) {
				out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "vidraresource", "vms", "-o", "jsonpath={.status.vmRollout.phase}/{.status.vmRollout.updated}")
				return err == nil && out == "Completed/4", nil
			})

			kubectl(ctx, t, vmBundle("128Mi"), "apply", "-f", "-")
			vm0 := types.NamespacedName{Namespace: "vms", Name: "vm-0"}
			testfleet.Poll(t, 5*time.Millisecond, 60*time.Second, "the first restart", func() (bool, error) {
				return sim.Restarts(vm0) == 1, nil
			})
			operatorFrom(ctx, "vms").Kill()
			t.Logf("killed with restarts: %v", restartsOf(sim))

			again, err := fleetenv.StartOperator(ctx, "--kubeconfig="+cfg.KubeconfigFile(), "--hub-id=e2e")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				kubectl(ctx, t, nil, "delete", "vidraresource", "vms", "--timeout=60s") // released by the running operator
				if err := again.Stop(30 * time.Second); err != nil {
					t.Errorf("stop operator: %v", err)
				}
			})
			var out string
			testfleet.Eventually(t, 90*time.Second, "VM rollout Completed again", func() (bool, error) {
				var err error
				out, err = fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "vidraresource", "vms", "-o", "jsonpath={.metadata.generation} {.status.observedGeneration} {.status.vmRollout.phase} {.status.vmRollout.updated}")
				f := strings.Fields(out)
				return err == nil && len(f) == 4 && f[0] == f[1] && f[2] == "Completed" && f[3] == "4", nil
			})
			for vm, n := range restartsOf(sim) {
				if n != 1 {
					t.Errorf("VM %s restarted %d times, want 1", vm, n)
				}
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			operatorFrom(ctx, "vms").Kill() // if the assessment stopped before it did
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "kv-1")
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}

func restartsOf(sim *kubevirtsim.Simulator) map[string]int {
	out := map[string]int{}
	for i := range 4 {
		name := fmt.Sprintf("vm-%d", i)
		out[name] = sim.Restarts(types.NamespacedName{Namespace: "vms", Name: name})
	}
	return out
}
