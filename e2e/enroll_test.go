package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// kubectl runs kubectl on the hub as its admin, failing the test on error.
func kubectl(ctx context.Context, t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func createOperatorNamespace(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	kubectl(ctx, t, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+operatorNamespace+"\n"), "apply", "-f", "-")
	return ctx
}

// writeFile writes data into the test's temp dir and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLabeledSecretEnrollsAMember(t *testing.T) {
	feature := features.New("a user enrolls a member cluster with a labeled kubeconfig Secret").
		Setup(createOperatorNamespace).
		Setup(startOperator("enroll", "--cluster-probe-interval=1s")).
		Assess("kubectl get vidraclusters shows it Engaged with its version", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			member := fleetenv.Fleet(ctx).Members[0]
			path := writeFile(t, "edge-1.kubeconfig", member.Kubeconfig)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "edge-1", "--from-file=kubeconfig="+path)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "label", "secret", "edge-1", "vidra.infrahub.operators.com/cluster=edge-1", "site=paris")

			var out string
			testfleet.Eventually(t, 30*time.Second, "edge-1 Engaged", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "vidraclusters")
				r := row(out, "edge-1")
				return len(r) >= 3 && r[2] == "Engaged", nil
			})
			t.Logf("kubectl get vidraclusters:\n%s", out)
			row := row(out, "edge-1")
			if len(row) < 4 || row[2] != "Engaged" || row[3] != "v1.36.0" || !strings.HasPrefix(row[1], "https://127.0.0.1:") {
				t.Errorf("row = %q", row)
			}
			if got := kubectl(ctx, t, nil, "get", "vidraclusters", "-l", "site=paris", "-o", "name"); strings.TrimSpace(got) != "vidracluster.infrahub.operators.com/edge-1" {
				t.Errorf("selecting VidraClusters by the Secret's label gave %q", got)
			}
			return ctx
		}).
		Assess("a VidraResource applied with kubectl is delivered to it", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, []byte(`apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: hello
spec:
  destination:
    cluster: edge-1
    namespace: hello
    reconcileOnEvents: true
  manifest: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: greeting
    data:
      text: hello from the hub
`), "apply", "-f", "-")
			var out string
			testfleet.Eventually(t, 30*time.Second, "hello Succeeded", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "vidraresources")
				r := row(out, "hello")
				return len(r) >= 4 && r[1] == "edge-1" && r[2] == "Succeeded" && r[3] == "2", nil
			})
			t.Logf("kubectl get vidraresources:\n%s", out)
			member := fleetenv.Fleet(ctx).Members[0]
			got, err := member.Kubectl(ctx, nil, "-n", "hello", "get", "configmap", "greeting", "-o", "jsonpath={.data.text}")
			if err != nil || got != "hello from the hub" {
				t.Errorf("ConfigMap on the member: %q, %v", got, err)
			}
			kubectl(ctx, t, nil, "delete", "vidraresource", "hello", "--wait=true", "--timeout=30s")
			if _, err := member.Kubectl(ctx, nil, "-n", "hello", "get", "configmap", "greeting"); err == nil {
				t.Error("deleting the VidraResource left its ConfigMap on the member")
			}
			return ctx
		}).
		Assess("deleting the Secret retires the cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "edge-1")
			testfleet.Eventually(t, 30*time.Second, "edge-1 gone", func() (bool, error) {
				return !strings.Contains(kubectl(ctx, t, nil, "get", "vidraclusters"), "edge-1"), nil
			})
			return ctx
		}).
		Teardown(stopOperator("enroll")).
		Feature()
	testenv.Test(t, feature)
}

// restrictedRBAC lets a user do what the operator needs, but read no Secret.
const restrictedRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vidra-no-secrets
rules:
- apiGroups: ["infrahub.operators.com"]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["*"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["*"]
# The revision history, and its index.
- apiGroups: ["apps"]
  resources: ["controllerrevisions"]
  verbs: ["*"]
# The VM rollout, on a cluster that runs KubeVirt.
- apiGroups: ["kubevirt.io"]
  resources: ["virtualmachines"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["kubevirt.io"]
  resources: ["virtualmachineinstances"]
  verbs: ["get", "delete"]
- apiGroups: ["subresources.kubevirt.io"]
  resources: ["virtualmachines/restart"]
  verbs: ["update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vidra-no-secrets
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vidra-no-secrets
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: vidra-standalone
`

func TestStandaloneModeReadsNoSecret(t *testing.T) {
	var kubeconfigPath string
	feature := features.New("standalone mode manages only the local cluster and reads no Secret").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, []byte(restrictedRBAC), "apply", "-f", "-")
			kubeconfig, err := fleetenv.Fleet(ctx).Hub.AddUser("vidra-standalone")
			if err != nil {
				t.Fatal(err)
			}
			kubeconfigPath = writeFile(t, "standalone.kubeconfig", kubeconfig)
			// A labeled Secret that a hub-mode operator would enroll.
			member := fleetenv.Fleet(ctx).Members[0]
			path := writeFile(t, "edge-2.kubeconfig", member.Kubeconfig)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "edge-2", "--from-file=kubeconfig="+path)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "label", "secret", "edge-2", "vidra.infrahub.operators.com/cluster=edge-2")
			return ctx
		}).
		Assess("with --cluster-provider=none it runs without any right on Secrets", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			op, err := fleetenv.StartOperator(ctx, "--kubeconfig="+kubeconfigPath, "--cluster-provider=none", "--leader-elect", "--hub-id=e2e")
			if err != nil {
				t.Fatal(err)
			}
			testfleet.Eventually(t, 30*time.Second, "standalone operator ready", func() (bool, error) {
				code, _, err := fleetenv.Get(ctx, op.HealthURL+"/readyz")
				return code == 200, err
			})
			time.Sleep(3 * time.Second) // time enough to have tried, had it wanted Secrets
			if err := op.Stop(30 * time.Second); err != nil {
				t.Fatalf("%v\n%s", err, op.Logs())
			}
			if logs := string(op.Logs()); strings.Contains(logs, "forbidden") || strings.Contains(logs, "secrets") {
				t.Errorf("the standalone operator tried to read Secrets:\n%s", logs)
			}
			if out := kubectl(ctx, t, nil, "get", "vidraclusters", "-o", "name"); strings.Contains(out, "edge-2") {
				t.Errorf("a standalone operator enrolled a cluster: %s", out)
			}
			return ctx
		}).
		Assess("the same rights in hub mode are refused Secrets, which the check above would catch", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			op, err := fleetenv.StartOperator(ctx, "--kubeconfig="+kubeconfigPath, "--leader-elect", "--hub-id=e2e")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = op.Stop(30 * time.Second) }()
			testfleet.Eventually(t, 30*time.Second, "hub-mode operator refused Secrets", func() (bool, error) {
				logs := string(op.Logs())
				return strings.Contains(logs, "forbidden") && strings.Contains(logs, "secrets"), nil
			})
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "edge-2")
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}

// row returns the cells of the table row whose first cell is name.
// engaged says whether `kubectl get vidraclusters` shows every named cluster Engaged.
func engaged(table string, names ...string) bool {
	for _, name := range names {
		if r := row(table, name); len(r) < 3 || r[2] != "Engaged" {
			return false
		}
	}
	return true
}

func row(table, name string) []string {
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Fields(line)
		if len(cells) > 0 && cells[0] == name {
			return cells
		}
	}
	return nil
}
