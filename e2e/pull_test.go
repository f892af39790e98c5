package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const (
	pullCluster = "edge-pull"
	// pullAppNamespace is the only namespace the pull member's delivery identity may use.
	pullAppNamespace = "pull-apps"
	// pullHubNamespace is the cluster's namespace on the hub (pull.Namespace).
	pullHubNamespace = "vidra-pull-" + pullCluster
	// pullAgentTimeout is the hub's --agent-timeout: short, so that a silent agent shows
	// within the test.
	pullAgentTimeout = 5 * time.Second
	// pullAgentSecret is where enroll leaves the agent its way to the hub, on the member.
	pullAgentSecret = "vidra-agent-hub"
	agentName       = "vidra-agent"
)

const pullBundle = `apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: pull-hello
spec:
  destination:
    cluster: ` + pullCluster + `
    namespace: ` + pullAppNamespace + `
    reconcileOnEvents: true
  manifest: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: greeting
    data:
      text: pulled from the hub
`

// pullMember is the member enrolled in pull mode: member-2, which the other suites enroll
// only in push mode, each for its own time (their Secrets are deleted when they end).
// Unenrolling at the end leaves it as it was, Vidra's CRDs included.
func pullMember(ctx context.Context) *testfleet.Cluster {
	return fleetenv.Fleet(ctx).Members[1]
}

// agentKubeconfig writes into dir a kubeconfig of the member that holds a token of the
// agent's ServiceAccount there, and nothing of the admin's: what the agent's pod would
// mount.
func agentKubeconfig(ctx context.Context, t *testing.T, dir string, member *testfleet.Cluster) string {
	t.Helper()
	return agentKubeconfigIn(ctx, t, dir, member, operatorNamespace)
}

// agentKubeconfigIn is agentKubeconfig for an agent enrolled with --agent-namespace.
func agentKubeconfigIn(ctx context.Context, t *testing.T, dir string, member *testfleet.Cluster, namespace string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentName}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := member.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatalf("token of %s/%s on %s: %v", sa.Namespace, sa.Name, member.Name, err)
	}
	admin, err := clientcmd.Load(member.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", member.Name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[member.Name] = admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg.AuthInfos[agentName] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	cfg.Contexts[member.Name] = &clientcmdapi.Context{Cluster: member.Name, AuthInfo: agentName}
	cfg.CurrentContext = member.Name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cell returns the cell of column in the row whose first cell is name, in kubectl's
// table: cells are cut at the header's offsets, since an empty cell (a pull cluster has no
// SERVER) would shift strings.Fields.
func cell(table, name, column string) string {
	lines := strings.Split(table, "\n")
	if len(lines) == 0 {
		return ""
	}
	header := lines[0]
	start := strings.Index(header, column)
	if start < 0 {
		return ""
	}
	// The column ends where the next one's name starts, after the spaces that pad it.
	end := len(header)
	if next := strings.IndexFunc(header[start+len(column):], func(r rune) bool { return r != ' ' }); next >= 0 {
		end = start + len(column) + next
	}
	for _, line := range lines[1:] {
		if cells := strings.Fields(line); len(cells) == 0 || cells[0] != name {
			continue
		}
		if start >= len(line) {
			return ""
		}
		return strings.TrimSpace(line[start:min(end, len(line))])
	}
	return ""
}

// TestPullModeEndToEnd: a user enrolls member-2 in pull mode with kubectl vidra enroll
// --pull, and runs its agent as its own process (bin/vidra --mode=agent) with the token
// of the agent's ServiceAccount on the member, as the chart's pod would. The hub shows
// the cluster Engaged in mode Pull; a VidraResource for it becomes Ready with the agent's
// report and its drift is repaired by the agent; a killed agent turns the cluster
// Unreachable (AgentSilent) once --agent-timeout passes, and a restarted one Engaged
// again; kubectl vidra unenroll leaves nothing on either side.
func TestPullModeEndToEnd(t *testing.T) {
	var (
		agent      *fleetenv.Operator
		kubeconfig string // the agent's, on the member
		unenrolled bool
		// dir outlives each step, as the agent's kubeconfig must.
		dir = t.TempDir()
	)
	startAgent := func(ctx context.Context, t *testing.T) {
		t.Helper()
		var err error
		agent, err = fleetenv.StartOperator(ctx, "--mode=agent", "--kubeconfig="+kubeconfig,
			"--agent-namespace="+operatorNamespace, "--agent-heartbeat=1s")
		if err != nil {
			t.Fatal(err)
		}
	}
	phase := func(ctx context.Context, t *testing.T) (table, phase, mode string) {
		table = kubectl(ctx, t, nil, "get", "vidraclusters")
		return table, cell(table, pullCluster, "PHASE"), cell(table, pullCluster, "MODE")
	}
	readyReason := func(ctx context.Context, t *testing.T) string {
		return kubectl(ctx, t, nil, "get", "vidracluster", pullCluster, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`)
	}
	waitEngaged := func(ctx context.Context, t *testing.T, what string) string {
		t.Helper()
		var table string
		testfleet.Eventually(t, 60*time.Second, what, func() (bool, error) {
			var p, m string
			table, p, m = phase(ctx, t)
			return p == "Engaged" && m == "Pull", nil
		})
		if reason := readyReason(ctx, t); reason != "AgentReporting" {
			t.Errorf("Ready reason %q, want AgentReporting", reason)
		}
		return table
	}
	member := pullMember

	feature := features.New("a member enrolled in pull mode, its agent run as its own process").
		Setup(createOperatorNamespace).
		Setup(startOperator("pull", "--agent-timeout="+pullAgentTimeout.String(), "--cluster-probe-interval=1s")).
		Assess("kubectl vidra enroll --pull leaves the hub no credential, and the member its agent's Secret", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := userPlugin(ctx, t, "enroll", pullCluster, "--pull", "--context", member(ctx).Name, "--hub-context", "hub",
				"--install-agent=false", "--namespaces", pullAppNamespace, "--labels", "site=pull")
			t.Logf("kubectl vidra enroll --pull:\n%s", out)
			if data := kubectl(ctx, t, nil, "-n", operatorNamespace, "get", "secret", pullCluster, "-o", "jsonpath={.data}"); data != "" {
				t.Errorf("the enrollment Secret on the hub holds data: %s", data)
			}
			keys, err := member(ctx).Kubectl(ctx, nil, "-n", operatorNamespace, "get", "secret", pullAgentSecret, "-o", "go-template={{range $k, $v := .data}}{{$k}} {{end}}")
			if err != nil || !strings.Contains(keys, "kubeconfig") || !strings.Contains(keys, "cluster") {
				t.Errorf("the agent's Secret on the member has keys %q (%v), want kubeconfig and cluster", keys, err)
			}
			// No agent runs yet: the hub waits for its first heartbeat.
			testfleet.Eventually(t, 30*time.Second, pullCluster+" Pending in mode Pull", func() (bool, error) {
				_, p, m := phase(ctx, t)
				return p == "Pending" && m == "Pull", nil
			})
			return ctx
		}).
		Assess("bin/vidra --mode=agent reports: kubectl get vidraclusters shows it Engaged, mode Pull", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubeconfig = agentKubeconfig(ctx, t, dir, member(ctx))
			startAgent(ctx, t)
			table := waitEngaged(ctx, t, pullCluster+" Engaged in mode Pull")
			t.Logf("kubectl get vidraclusters:\n%s", table)
			if got := kubectl(ctx, t, nil, "get", "vidraclusters", "-l", "site=pull", "-o", "name"); strings.TrimSpace(got) != "vidracluster.infrahub.operators.com/"+pullCluster {
				t.Errorf("selecting VidraClusters by the enrollment's label gave %q", got)
			}
			if v := kubectl(ctx, t, nil, "get", "vidracluster", pullCluster, "-o", "jsonpath={.status.agent.version}"); v == "" {
				t.Error("the VidraCluster shows no agent version")
			}
			// One heartbeat a second (--agent-heartbeat): the hub sees them go by.
			beat := func() string {
				return kubectl(ctx, t, nil, "get", "vidracluster", pullCluster, "-o", "jsonpath={.status.agent.lastHeartbeat}")
			}
			first := beat()
			testfleet.Eventually(t, 15*time.Second, "a later heartbeat", func() (bool, error) {
				return beat() != first, nil
			})
			return ctx
		}).
		Assess("a VidraResource applied on the hub is delivered by the agent, Ready, and its drift repaired", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, []byte(pullBundle), "apply", "-f", "-")
			testfleet.Eventually(t, 60*time.Second, "pull-hello Ready on the hub", func() (bool, error) {
				out := kubectl(ctx, t, nil, "get", "vidraresource", "pull-hello", "-o",
					`jsonpath={.metadata.generation}/{.status.observedGeneration}/{.status.conditions[?(@.type=="Ready")].status}`)
				return out == "1/1/True", nil
			})
			t.Logf("kubectl get vidraresources:\n%s", kubectl(ctx, t, nil, "get", "vidraresources"))
			text := func() (string, error) {
				return member(ctx).Kubectl(ctx, nil, "-n", pullAppNamespace, "get", "configmap", "greeting", "-o", "jsonpath={.data.text}")
			}
			if got, err := text(); err != nil || got != "pulled from the hub" {
				t.Fatalf("ConfigMap on the member: %q, %v", got, err)
			}
			uid := func() (string, error) {
				return member(ctx).Kubectl(ctx, nil, "-n", pullAppNamespace, "get", "configmap", "greeting", "-o", "jsonpath={.metadata.uid}")
			}
			deleted, err := uid()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := member(ctx).Kubectl(ctx, nil, "-n", pullAppNamespace, "delete", "configmap", "greeting"); err != nil {
				t.Fatal(err)
			}
			// A new UID: the ConfigMap was created again, not merely found before it went.
			testfleet.Eventually(t, 20*time.Second, "the deleted ConfigMap repaired on the member", func() (bool, error) {
				got, err := text()
				now, _ := uid()
				return err == nil && got == "pulled from the hub" && now != deleted, nil
			})
			return ctx
		}).
		Assess("a killed agent turns the cluster Unreachable (AgentSilent); started again, it is Engaged", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			agent.Kill()
			killed := time.Now()
			// The last heartbeat was at most a second before the kill; the hub looks
			// again when the timeout has passed since it.
			testfleet.Eventually(t, pullAgentTimeout+15*time.Second, pullCluster+" Unreachable", func() (bool, error) {
				_, p, _ := phase(ctx, t)
				return p == "Unreachable", nil
			})
			t.Logf("Unreachable %v after the agent was killed (--agent-timeout=%v)", time.Since(killed).Round(100*time.Millisecond), pullAgentTimeout)
			if reason := readyReason(ctx, t); reason != "AgentSilent" {
				t.Errorf("Ready reason %q, want AgentSilent", reason)
			}
			// What it delivered stays without it.
			if _, err := member(ctx).Kubectl(ctx, nil, "-n", pullAppNamespace, "get", "configmap", "greeting"); err != nil {
				t.Errorf("the ConfigMap went with the agent: %v", err)
			}
			startAgent(ctx, t)
			t.Logf("kubectl get vidraclusters:\n%s", waitEngaged(ctx, t, pullCluster+" Engaged again"))
			return ctx
		}).
		Assess("deleting the VidraResource releases its ConfigMap through the agent", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "delete", "vidraresource", "pull-hello", "--wait=true", "--timeout=60s")
			if _, err := member(ctx).Kubectl(ctx, nil, "-n", pullAppNamespace, "get", "configmap", "greeting"); err == nil {
				t.Error("deleting the VidraResource left its ConfigMap on the member")
			}
			return ctx
		}).
		Assess("kubectl vidra unenroll leaves nothing on either side", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The agent stops first, as its pod would be deleted.
			if err := agent.Stop(30 * time.Second); err != nil {
				t.Errorf("stop the agent: %v\n%s", err, agent.Logs())
			}
			// This fleet runs no namespace controller: one runs now, so that the
			// cluster's namespace on the hub really goes, with everything in it.
			kcm, err := fleetenv.StartControllerManager(fleetenv.Fleet(ctx).Hub, t.TempDir(), "namespace-controller")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := kcm.Stop(30 * time.Second); err != nil {
					t.Error(err)
				}
				if t.Failed() {
					t.Logf("kube-controller-manager logs:\n%s", kcm.Logs())
				}
			})
			out := userPlugin(ctx, t, "unenroll", pullCluster, "--context", member(ctx).Name, "--hub-context", "hub")
			unenrolled = true
			t.Logf("kubectl vidra unenroll:\n%s", out)

			if out, err := member(ctx).Kubectl(ctx, nil, "-n", operatorNamespace, "get", "secret", pullAgentSecret, "--ignore-not-found", "-o", "name"); err != nil || out != "" {
				t.Errorf("the agent's Secret is still on the member: %q, %v", out, err)
			}
			for _, kind := range []string{"serviceaccounts", "roles", "rolebindings", "clusterroles", "clusterrolebindings"} {
				for _, label := range []string{"vidra.infrahub.operators.com/agent=vidra-system.vidra-agent", "vidra.infrahub.operators.com/identity=vidra-system.vidra"} {
					if out, err := member(ctx).Kubectl(ctx, nil, "get", kind, "-A", "-l", label, "-o", "name"); err != nil || out != "" {
						t.Errorf("%s labeled %s left on the member: %q, %v", kind, label, out, err)
					}
				}
			}
			// Vidra's CRDs were installed by enroll and nothing else on the member uses them:
			// each is deleted, and no object of them is left. The API server removes a
			// deleted CRD once its own clean-up of the CRD's objects is done, which took
			// over two minutes for seven CRDs on a loaded machine: that wait is its own.
			testfleet.Eventually(t, 3*time.Minute, "the CRDs enroll installed deleted from the member, with no object left", func() (bool, error) {
				out, err := member(ctx).Kubectl(ctx, nil, "get", "crds", "-l", "vidra.infrahub.operators.com/installed-by-enroll=true", "-o",
					`jsonpath={range .items[*]}{.metadata.name} deleted at {.metadata.deletionTimestamp}{"\n"}{end}`)
				if err != nil || out == "" {
					return err == nil, err
				}
				if strings.Contains(out, "deleted at \n") || strings.HasSuffix(out, "deleted at ") {
					return false, fmt.Errorf("CRDs not deleted:\n%s", out)
				}
				// Only the CRDs still being removed are asked for: a list naming a resource
				// whose CRD is already gone fails as a whole.
				var remaining []string
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					remaining = append(remaining, strings.Fields(line)[0])
				}
				left, err := member(ctx).Kubectl(ctx, nil, "get", strings.Join(remaining, ","), "-A",
					"--ignore-not-found", "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name} {.metadata.finalizers}{"\n"}{end}`)
				if err != nil {
					return false, err
				}
				if left != "" {
					return false, fmt.Errorf("objects of the deleted CRDs left: %q", left)
				}
				return true, nil
			})
			testfleet.Eventually(t, 60*time.Second, "namespace "+pullHubNamespace+" gone from the hub", func() (bool, error) {
				out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "namespace", pullHubNamespace, "--ignore-not-found", "-o", "name")
				return err == nil && out == "", err
			})
			testfleet.Eventually(t, 30*time.Second, "VidraCluster "+pullCluster+" gone", func() (bool, error) {
				return kubectl(ctx, t, nil, "get", "vidracluster", pullCluster, "--ignore-not-found", "-o", "name") == "", nil
			})
			if out := kubectl(ctx, t, nil, "-n", operatorNamespace, "get", "secret", pullCluster, "--ignore-not-found", "-o", "name"); out != "" {
				t.Errorf("the enrollment Secret is still on the hub: %s", out)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if agent != nil {
				if err := agent.Stop(30 * time.Second); err != nil {
					t.Errorf("stop the agent: %v", err)
				}
				if t.Failed() {
					t.Logf("agent logs:\n%s", agent.Logs())
				}
			}
			if !unenrolled {
				// A failure midway: leave member-2 to the next suites as it was.
				_, _ = fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "delete", "vidraresource", "pull-hello", "--ignore-not-found", "--wait=false")
				path, err := fleetenv.Fleet(ctx).WriteUserKubeconfig(t.TempDir())
				if err == nil {
					binary, _ := fleetenv.PluginBinary(ctx)
					out, err := exec.CommandContext(ctx, binary, "unenroll", pullCluster, "--context", member(ctx).Name, "--hub-context", "hub",
						"--hub-kubeconfig="+path, "--kubeconfig="+path).CombinedOutput()
					t.Logf("kubectl vidra unenroll (cleanup): %v\n%s", err, out)
				}
			}
			if t.Failed() {
				t.Logf("operator logs:\n%s", operatorFrom(ctx, "pull").Logs())
			}
			return ctx
		}).
		Teardown(stopOperator("pull")).
		Feature()
	testenv.Test(t, feature)
}
