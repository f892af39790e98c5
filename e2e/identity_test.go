package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// userPlugin runs kubectl vidra with the fleet admin's kubeconfig (contexts hub,
// member-1, member-2), as a user enrolling clusters would.
func userPlugin(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	path, err := fleetenv.Fleet(ctx).WriteUserKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return pluginWith(ctx, t, append(args, "--hub-kubeconfig="+path, "--kubeconfig="+path)...)
}

const scopedBundle = `apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: %s
spec:
  destination:
    cluster: edge-scoped
    namespace: %s
    reconcileOnEvents: true
  manifest: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: settings
    data:
      mode: scoped
`

// TestScopedIdentityEndToEnd: a user enrolls a member with kubectl vidra enroll
// --namespaces; the real operator delivers into that namespace with the identity's token
// alone, refuses a bundle for another namespace, renews the token (after 5% of its
// 10 minutes here) and keeps repairing drift with the renewed one; kubectl vidra unenroll
// then leaves nothing on either side.
func TestScopedIdentityEndToEnd(t *testing.T) {
	secretHash := func(ctx context.Context, t *testing.T) [32]byte {
		return sha256.Sum256([]byte(kubectl(ctx, t, nil, "-n", operatorNamespace, "get", "secret", "edge-scoped", "-o", "jsonpath={.data.kubeconfig}")))
	}
	member := func(ctx context.Context) *testfleet.Cluster { return fleetenv.Fleet(ctx).Members[0] }
	var enrolled [32]byte

	feature := features.New("a member enrolled with a scoped identity that renews itself").
		Setup(createOperatorNamespace).
		Setup(startOperator("identity", "--cluster-probe-interval=1s", "--token-renewal-point=0.05")).
		Assess("enroll creates the identity and the cluster is engaged with its token", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := userPlugin(ctx, t, "enroll", "edge-scoped", "--context", "member-1", "--hub-context", "hub", "--namespaces", "team-a", "--token-ttl", "10m")
			t.Logf("kubectl vidra enroll:\n%s", out)
			var vcs string
			testfleet.Eventually(t, 30*time.Second, "edge-scoped Engaged", func() (bool, error) {
				vcs = kubectl(ctx, t, nil, "get", "vidraclusters", "-o", "wide")
				return cell(vcs, "edge-scoped", "PHASE") == "Engaged" && cell(vcs, "edge-scoped", "IDENTITY") == "ServiceAccount", nil
			})
			t.Logf("kubectl get vidraclusters -o wide:\n%s", vcs)
			enrolled = secretHash(ctx, t)
			return ctx
		}).
		Assess("a bundle in its namespace is delivered; one outside is refused", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, fmt.Appendf(nil, scopedBundle, "inside", "team-a"), "apply", "-f", "-")
			kubectl(ctx, t, fmt.Appendf(nil, scopedBundle, "outside", "team-b"), "apply", "-f", "-")
			testfleet.Eventually(t, 30*time.Second, "inside Succeeded", func() (bool, error) {
				r := row(kubectl(ctx, t, nil, "get", "vidraresources"), "inside")
				return len(r) >= 3 && r[2] == "Succeeded", nil
			})
			if got, err := member(ctx).Kubectl(ctx, nil, "-n", "team-a", "get", "configmap", "settings", "-o", "jsonpath={.data.mode}"); err != nil || got != "scoped" {
				t.Errorf("ConfigMap in team-a on the member: %q, %v", got, err)
			}
			testfleet.Eventually(t, 30*time.Second, "outside refused by the policy", func() (bool, error) {
				out := kubectl(ctx, t, nil, "get", "vidraresource", "outside", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}`)
				return out == "PolicyDenied", nil
			})
			if _, err := member(ctx).Kubectl(ctx, nil, "get", "namespace", "team-b"); err == nil {
				t.Error("namespace team-b exists on the member")
			}
			return ctx
		}).
		Assess("the token is renewed, and drift is still repaired with it", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			testfleet.Eventually(t, 60*time.Second, "the token renewed in the Secret", func() (bool, error) {
				return secretHash(ctx, t) != enrolled, nil
			})
			events := kubectl(ctx, t, nil, "-n", operatorNamespace, "get", "events", "--field-selector", "reason=CredentialsRenewed", "-o", "jsonpath={.items[*].message}")
			if !strings.Contains(events, "cluster edge-scoped: the token of vidra-system/vidra was renewed") {
				t.Errorf("no CredentialsRenewed Event: %q", events)
			}
			// The renewed connection is engaged and its VidraResources looked at again; the
			// next renewal is 30 s away, so a repair now comes from the drift watch on it.
			time.Sleep(3 * time.Second)
			if _, err := member(ctx).Kubectl(ctx, nil, "-n", "team-a", "patch", "configmap", "settings", "--type=merge", "-p", `{"data":{"mode":"changed"}}`); err != nil {
				t.Fatal(err)
			}
			testfleet.Eventually(t, 15*time.Second, "the drift repaired", func() (bool, error) {
				got, err := member(ctx).Kubectl(ctx, nil, "-n", "team-a", "get", "configmap", "settings", "-o", "jsonpath={.data.mode}")
				return err == nil && got == "scoped", nil
			})
			return ctx
		}).
		Assess("unenroll leaves nothing on either side", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "delete", "vidraresource", "inside", "outside", "--wait=true", "--timeout=30s")
			out := userPlugin(ctx, t, "unenroll", "edge-scoped", "--context", "member-1", "--hub-context", "hub")
			t.Logf("kubectl vidra unenroll:\n%s", out)
			testfleet.Eventually(t, 30*time.Second, "edge-scoped gone", func() (bool, error) {
				return !strings.Contains(kubectl(ctx, t, nil, "get", "vidraclusters"), "edge-scoped"), nil
			})
			if out, _ := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "-n", operatorNamespace, "get", "secret", "edge-scoped"); out != "" {
				t.Errorf("the Secret is still on the hub: %s", out)
			}
			for _, kind := range []string{"serviceaccounts", "roles", "rolebindings", "clusterroles", "clusterrolebindings"} {
				if out, err := member(ctx).Kubectl(ctx, nil, "get", kind, "-A", "-l", "vidra.infrahub.operators.com/identity=vidra-system.vidra", "-o", "name"); err != nil || out != "" {
					t.Errorf("%s of the identity left on the member: %q, %v", kind, out, err)
				}
			}
			return ctx
		}).
		Teardown(stopOperator("identity")).
		Feature()
	testenv.Test(t, feature)
}
