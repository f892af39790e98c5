package quickstart

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// pushChart pushes this tree's chart as release X.Y.Z to oci://REGISTRY/vidra-operator/charts,
// as make release does: appVersion vX.Y.Z, the image tag it runs.
func pushChart(t *testing.T, registry *ociregistry.Registry) {
	t.Helper()
	ch, err := loader.Load("../../charts/vidra")
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = release, "v"+release
	helmrepo.PushOCI(t, registry, "vidra-operator/charts", ch)
}

// startChartOperator runs bin/vidra, its kubeconfig in dir (which outlives it), as the chart's Deployment would: its arguments, and
// the rights of its ServiceAccount (vidra-system/vidra), which it impersonates.
func startChartOperator(ctx context.Context, t *testing.T, dir string) *fleetenv.Operator {
	t.Helper()
	kubeconfig, err := fleetenv.ServiceAccountKubeconfig(fleetenv.Fleet(ctx).Hub.Kubeconfig, "vidra-system", "vidra")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "operator.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	op, err := fleetenv.StartOperator(ctx, append(chartArgs(ctx, t), "--kubeconfig="+path, "--source-cache-dir=",
		"--webhook-bind-address=0", "--cluster-probe-interval=1s")...)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// startAgent runs bin/vidra as the agent Deployment kubectl vidra enroll --pull
// installed on member would: with a token of its ServiceAccount, vidra-system/vidra-agent.
func startAgent(ctx context.Context, t *testing.T, member *testfleet.Cluster, dir string) *fleetenv.Operator {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "vidra-system", Name: "vidra-agent"}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := member.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatalf("a token of %s/%s on %s: %v", sa.Namespace, sa.Name, member.Name, err)
	}
	admin, err := clientcmd.Load(member.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["member"] = admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	cfg.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "agent"}
	cfg.CurrentContext = "member"
	path := filepath.Join(dir, "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	agent, err := fleetenv.StartOperator(ctx, "--mode=agent", "--kubeconfig="+path, "--agent-namespace=vidra-system", "--agent-heartbeat=1s")
	if err != nil {
		t.Fatal(err)
	}
	return agent
}
