package inventory_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// argoSecret is an Argo CD declarative cluster Secret in ns for the cluster c, with its
// client certificate, as a team keeps them for Argo CD; config is merged over it.
func argoSecret(t *testing.T, ns, secret, name string, c *testfleet.Cluster, labels map[string]string, config map[string]any) *corev1.Secret {
	t.Helper()
	kc, err := clientcmd.Load(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	cfg := map[string]any{"tlsClientConfig": map[string]any{
		"caData": cluster.CertificateAuthorityData, "certData": user.ClientCertificateData, "keyData": user.ClientKeyData,
	}}
	for k, v := range config {
		cfg[k] = v
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"argocd.argoproj.io/secret-type": "cluster"}
	for k, v := range labels {
		all[k] = v
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, Labels: all},
		Data:       map[string][]byte{"name": []byte(name), "server": []byte(cluster.Server), "config": data},
	}
}

// An Argo CD cluster Secret enrolls its cluster as <namespace>.<name> with a scoped
// identity, its labels followed; one whose credentials come from a program is refused,
// saying so; a Secret deleted lets its cluster go.
func TestAnArgoCDClusterSecretIsEnrolledOrRefused(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	createNamespace(t, listed)
	const name = listed + ".prod"
	createNamespace(t, unlisted)
	create(t, argoSecret(t, unlisted, "cluster-prod", "prod", fleet.Members[1], nil, nil))
	secret := argoSecret(t, listed, "cluster-prod", "prod", fleet.Members[1], map[string]string{"env": "prod"}, nil)
	create(t, secret)
	vc := waitCluster(t, name, vidrav1alpha1.ClusterEngaged, "")
	if vc.Labels["env"] != "prod" || vc.Labels["argocd.argoproj.io/secret-type"] != "" {
		t.Errorf("VidraCluster labels = %v, want the Secret's env=prod alone", vc.Labels)
	}
	checkScopedIdentity(t, name, "argocd")
	checkDelivers(t, name, fleet.Members[1])
	if err := hub.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	secret.Labels["env"] = "staging"
	if err := hub.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" labeled env=staging", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, vc)
		return err == nil && vc.Labels["env"] == "staging", err
	})

	exec := argoSecret(t, listed, "cluster-eks", "eks", fleet.Members[0], nil, map[string]any{
		"execProviderConfig": map[string]any{"command": "argocd-k8s-auth", "args": []string{"aws"}},
	})
	create(t, exec)
	refused := waitCluster(t, listed+".eks", vidrav1alpha1.ClusterRejected, vidrav1alpha1.ReasonInventoryRefused)
	if !strings.Contains(refused.Status.Message, "execProviderConfig") {
		t.Errorf("message = %q, want execProviderConfig named", refused.Status.Message)
	}

	if err := hub.Get(ctx, client.ObjectKey{Name: unlisted + ".prod"}, &vidrav1alpha1.VidraCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("an Argo CD cluster Secret of a namespace not listed was enrolled: %v", err)
	}
	for _, s := range []*corev1.Secret{secret, exec} {
		if err := hub.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, gone := range []string{name, listed + ".eks"} {
		testfleet.Eventually(t, 60*time.Second, "VidraCluster "+gone+" gone", func() (bool, error) {
			err := hub.Get(ctx, client.ObjectKey{Name: gone}, &vidrav1alpha1.VidraCluster{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		if err := hub.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: gone}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("enrollment Secret %s after its Argo CD Secret went: %v", gone, err)
		}
	}
}
