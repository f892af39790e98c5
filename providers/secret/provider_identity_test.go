package secret_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// enrollIdentity does what kubectl vidra enroll does: it creates the identity on the
// member with the member's admin credentials, requests a 10-minute token, and enrolls the
// cluster with a kubeconfig holding that token alone (and, for an identity narrowed to
// namespaces, the delivery policy that says so).
func enrollIdentity(t *testing.T, member *testfleet.Cluster, secretName, clusterName string, spec identity.Spec) *corev1.Secret {
	t.Helper()
	ctx := context.Background()
	sa := spec.ServiceAccount
	if _, err := identity.Apply(ctx, member.Client, spec, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := identity.Remove(context.Background(), member.Client, sa, false); err != nil {
			t.Errorf("remove identity %s: %v", sa, err)
		}
	})
	token, err := identity.RequestToken(ctx, member.Client, sa, identity.MinTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.Load(member.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	data, err := identity.Kubeconfig(clusterName, currentCluster(admin), token.Value)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: namespace,
			Labels:      map[string]string{vidrav1alpha1.ClusterLabel: clusterName},
			Annotations: map[string]string{vidrav1alpha1.ServiceAccountAnnotation: sa.String()}},
		Data: map[string][]byte{vidrav1alpha1.KubeconfigKey: data},
	}
	if spec.Scoped() {
		s.Annotations[vidrav1alpha1.AllowedNamespacesAnnotation] = strings.Join(spec.Namespaces, ",")
	}
	if err := fleet.Hub.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { retireSecret(t, s) })
	return s
}

func secretToken(t *testing.T, name string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	token, err := identity.TokenOf(s.Data[vidrav1alpha1.KubeconfigKey])
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// A token of an identity enroll created is renewed through the member's TokenRequest API
// with the token itself, written back to the Secret and engaged as a rotation: the
// cluster stays engaged, the renewed token works, and the VidraCluster and the metric
// show its new expiry. (The provider renews after 1% of the lifetime here.)
func TestIdentityTokenIsRenewedBeforeItExpires(t *testing.T) {
	sa := types.NamespacedName{Namespace: "vidra-renew", Name: "vidra"}
	secret := enrollIdentity(t, fleet.Members[1], "edge-renew-kubeconfig", "edge-renew", identity.Spec{ServiceAccount: sa})
	first := secretToken(t, secret.Name)
	firstLife, err := identity.LifetimeOf(first)
	if err != nil {
		t.Fatal(err)
	}
	vc := vidraCluster(t, "edge-renew", 15*time.Second, "Engaged with a ServiceAccount identity", func(vc *vidrav1alpha1.VidraCluster) bool {
		id := vc.Status.Identity
		return vc.Status.Phase == vidrav1alpha1.ClusterEngaged && id != nil && id.Type == vidrav1alpha1.IdentityServiceAccount && id.ExpiresAt != nil
	})
	if id := vc.Status.Identity; id.ServiceAccount != sa.String() || id.RenewAt == nil || !id.RenewAt.Before(id.ExpiresAt) {
		t.Errorf("identity status %+v", id)
	}

	var renewed string
	testfleet.Eventually(t, 30*time.Second, "the token renewed in the Secret", func() (bool, error) {
		renewed = secretToken(t, secret.Name)
		return renewed != first, nil
	})
	life, err := identity.LifetimeOf(renewed)
	if err != nil {
		t.Fatal(err)
	}
	if !life.ExpiresAt.After(firstLife.ExpiresAt) || life.TTL() != firstLife.TTL() {
		t.Errorf("renewed token lives %s until %s; the first %s until %s", life.TTL(), life.ExpiresAt, firstLife.TTL(), firstLife.ExpiresAt)
	}
	vidraCluster(t, "edge-renew", 15*time.Second, "engaged with the renewed token", func(vc *vidrav1alpha1.VidraCluster) bool {
		id := vc.Status.Identity
		return kubeconfigCurrent(metav1.ConditionTrue, "Rotated")(vc) && id != nil && id.ExpiresAt != nil && id.ExpiresAt.After(firstLife.ExpiresAt) && id.Message == ""
	})
	// The renewed token authenticates on the member, as the identity.
	cfg, err := kubeconfig.Load(mutateKubeconfig(t, secret.Data[vidrav1alpha1.KubeconfigKey], func(c *clientcmdapi.Config) { currentUser(c).Token = renewed }), kubeconfig.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(sa.Namespace).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("the renewed token does not work: %v", err)
	}
	if left := metricValue(t, "vidra_cluster_credential_expiry_seconds", map[string]string{"cluster": "edge-renew"}); left <= 0 || left > 600 {
		t.Errorf("vidra_cluster_credential_expiry_seconds = %v, want the time left on a 10-minute token", left)
	}
}

// When renewal keeps failing, the VidraCluster says so with the time left; past expiry
// the cluster is Unreachable ("credentials expired: re-enroll") and no other cluster is
// affected. The member decides that renewal fails (its RBAC no longer lets the identity
// request tokens); the provider's clock is moved past the expiry, since the API server
// grants no token shorter than 10 minutes.
func TestExpiredCredentialsTurnOnlyThatClusterUnreachable(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[2]
	sa := types.NamespacedName{Namespace: "vidra-expire", Name: "vidra"}
	// Narrowed to a namespace other than its own, the identity may request tokens through
	// its token Role alone: a cluster-wide identity may request any token.
	secret := enrollIdentity(t, member, "edge-expire-kubeconfig", "edge-expire", identity.Spec{ServiceAccount: sa, Namespaces: []string{"expire-apps"}})
	enroll(t, "edge-bystander-kubeconfig", "edge-bystander", fleet.Members[0].Kubeconfig, nil)
	vidraCluster(t, "edge-expire", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	vidraCluster(t, "edge-bystander", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))

	// The identity may no longer request tokens for itself.
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: "vidra:vidra-expire:vidra:token"}}
	if err := member.Client.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	vc := vidraCluster(t, "edge-expire", 30*time.Second, "renewal failing", func(vc *vidrav1alpha1.VidraCluster) bool {
		id := vc.Status.Identity
		return id != nil && strings.Contains(id.Message, "renewal failed") && strings.Contains(id.Message, "the token expires in")
	})
	if vc.Status.Phase != vidrav1alpha1.ClusterEngaged {
		t.Errorf("phase %s while the token is still valid", vc.Status.Phase)
	}
	if note := warningEvent(t, secret, "CredentialsRenewalFailed"); !strings.Contains(note, "forbidden") {
		t.Errorf("renewal failure Event: %q", note)
	}

	clock.advance(t, 11*time.Minute)
	vc = vidraCluster(t, "edge-expire", 15*time.Second, "Unreachable: credentials expired", phaseIs(vidrav1alpha1.ClusterUnreachable))
	if readyReason(vc) != "CredentialsExpired" || !strings.Contains(vc.Status.Message, "credentials expired: re-enroll") {
		t.Errorf("Ready reason %q, message %q", readyReason(vc), vc.Status.Message)
	}
	if left := metricValue(t, "vidra_cluster_credential_expiry_seconds", map[string]string{"cluster": "edge-expire"}); left >= 0 {
		t.Errorf("vidra_cluster_credential_expiry_seconds = %v past expiry, want negative", left)
	}
	// Several probes later the other cluster is still engaged.
	time.Sleep(time.Second)
	if other := vidraCluster(t, "edge-bystander", time.Second, "still Engaged", phaseIs(vidrav1alpha1.ClusterEngaged)); other.Status.Identity == nil || other.Status.Identity.Type != vidrav1alpha1.IdentityKubeconfig {
		t.Errorf("the bystander's identity: %+v", other.Status.Identity)
	}
}
