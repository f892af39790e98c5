package main

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// identityClient is a clientset of the member with the kubeconfig of an enrollment Secret.
func identityClient(t *testing.T, secret *corev1.Secret) *kubernetes.Clientset {
	t.Helper()
	cfg, err := kubeconfig.Load(secret.Data[vidrav1alpha1.KubeconfigKey], kubeconfig.Policy{})
	if err != nil {
		t.Fatalf("the operator's policy refuses the enrollment kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// enroll creates the identity on the member, and the hub's Secret holds its token and
// nothing of the user's; what the identity may do is what the member's RBAC decides,
// measured with its token: its namespaces and kinds, nothing else, and tokens for itself
// alone. Enrolling again narrows it; unenroll leaves nothing on either side, and the
// token stops working.
func TestEnrollCreatesAScopedIdentityAndUnenrollRemovesIt(t *testing.T) {
	ctx := context.Background()
	enrollmentNamespace(t)
	deleteSecretAtEnd(t, "edge-scoped")
	kc := userKubeconfig(t)
	member := fleet.Members[0].Client

	out, stderr, err := runPlugin(t, "enroll", "edge-scoped", "--kubeconfig", kc, "--context", "member",
		"--namespaces", "web-a,web-b", "--cluster-kinds", "Namespace", "--token-ttl", "10m")
	if err != nil {
		t.Fatalf("enroll: %v\n%s", err, stderr)
	}
	t.Logf("kubectl vidra enroll:\n%s", out)
	for _, want := range []string{"ServiceAccount/vidra -n vidra-system configured (on the member)", "RoleBinding/vidra:vidra-system:vidra:namespace -n web-b configured",
		"token of serviceaccount vidra-system/vidra requested", "may manage objects in namespaces web-a, web-b and cluster-scoped Namespace", "secret/edge-scoped created (on the hub)"} {
		if !strings.Contains(out, want) {
			t.Errorf("enroll did not print %q", want)
		}
	}

	secret, ok := enrollmentSecret(t, "edge-scoped")
	if !ok {
		t.Fatal("no Secret edge-scoped on the hub")
	}
	raw, err := clientcmd.Load(secret.Data[vidrav1alpha1.KubeconfigKey])
	if err != nil {
		t.Fatal(err)
	}
	_, user := only(raw)
	if user.Token == "" || len(user.ClientCertificateData) > 0 || len(user.ClientKeyData) > 0 || user.Exec != nil || user.Username != "" {
		t.Fatalf("the Secret's user is not a token alone: %+v", user)
	}
	lifetime, err := identity.LifetimeOf(user.Token)
	if err != nil {
		t.Fatal(err)
	}
	if ttl := lifetime.TTL(); ttl != 10*time.Minute {
		t.Errorf("token lifetime %s, want 10m", ttl)
	}
	for k, want := range map[string]string{
		vidrav1alpha1.ServiceAccountAnnotation:      "vidra-system/vidra",
		vidrav1alpha1.AllowedNamespacesAnnotation:   "web-a,web-b",
		vidrav1alpha1.AllowedClusterKindsAnnotation: "Namespace",
	} {
		if got := secret.Annotations[k]; got != want {
			t.Errorf("annotation %s=%q, want %q", k, got, want)
		}
	}

	// What the identity may do, as the member's RBAC decides it.
	cs := identityClient(t, secret)
	if _, err := cs.CoreV1().ConfigMaps("web-a").Create(ctx, configMap("allowed"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create a ConfigMap in web-a: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("refused"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a ConfigMap in default: %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list Secrets of every namespace: %v, want Forbidden", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "escalate"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a ClusterRole (not in --cluster-kinds): %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web-c"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create a Namespace (in --cluster-kinds): %v", err)
	}
	expiry := int64(600)
	if _, err := cs.CoreV1().ServiceAccounts("vidra-system").CreateToken(ctx, "vidra", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("the identity requests a token for itself: %v", err)
	}
	if err := member.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "vidra-system", Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("vidra-system").CreateToken(ctx, "other", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the identity requests a token for another ServiceAccount: %v, want Forbidden", err)
	}
	// (Another ServiceAccount in its namespace would keep the namespace on unenroll.)
	if err := member.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "vidra-system", Name: "other"}}); err != nil {
		t.Fatal(err)
	}

	// Enrolling again is idempotent, and narrows: web-b's binding goes.
	out, stderr, err = runPlugin(t, "enroll", "edge-scoped", "--kubeconfig", kc, "--context", "member", "--namespaces", "web-a", "--token-ttl", "10m")
	if err != nil {
		t.Fatalf("enroll again: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "RoleBinding/vidra:vidra-system:vidra:namespace -n web-b deleted") || !strings.Contains(out, "secret/edge-scoped configured") {
		t.Errorf("enroll again printed:\n%s", out)
	}
	secret, _ = enrollmentSecret(t, "edge-scoped")
	if got := secret.Annotations[vidrav1alpha1.AllowedNamespacesAnnotation]; got != "web-a" {
		t.Errorf("allowed-namespaces after narrowing: %q", got)
	}
	if _, err := identityClient(t, secret).CoreV1().ConfigMaps("web-b").Create(ctx, configMap("now-refused"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a ConfigMap in web-b after narrowing: %v, want Forbidden", err)
	}

	// Unenroll removes both sides; the token stops working at once.
	out, stderr, err = runPlugin(t, "unenroll", "edge-scoped", "--kubeconfig", kc, "--context", "member")
	if err != nil {
		t.Fatalf("unenroll: %v\n%s", err, stderr)
	}
	t.Logf("kubectl vidra unenroll:\n%s", out)
	if _, ok := enrollmentSecret(t, "edge-scoped"); ok {
		t.Error("the Secret is still on the hub")
	}
	// The API server looks the ServiceAccount up in its own informer: a moment later.
	testfleet.Eventually(t, 10*time.Second, "the unenrolled token refused as Unauthorized", func() (bool, error) {
		_, err := cs.CoreV1().ConfigMaps("web-a").Get(ctx, "allowed", metav1.GetOptions{})
		return apierrors.IsUnauthorized(err), nil
	})
	sel := client.MatchingLabels{identity.Label: "vidra-system.vidra"}
	for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &corev1.ServiceAccountList{}} {
		if err := member.List(ctx, list, sel); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(items); n > 0 {
			t.Errorf("%T: %d objects of the identity left on the member", list, n)
		}
	}
	ns := &corev1.Namespace{}
	if err := member.Get(ctx, client.ObjectKey{Name: "vidra-system"}, ns); err == nil && ns.DeletionTimestamp.IsZero() {
		t.Error("the namespace enroll created is not being deleted")
	}

	// Again: nothing left to remove is fine.
	if out, stderr, err = runPlugin(t, "unenroll", "edge-scoped", "--kubeconfig", kc, "--context", "member"); err != nil || !strings.Contains(out, "secret/edge-scoped not found") {
		t.Errorf("unenroll again: %v\n%s%s", err, out, stderr)
	}
}

// --dry-run=client -o yaml shows every object enroll would create, the token left out,
// and creates nothing on either side.
func TestEnrollDryRunShowsTheIdentityAndCreatesNothing(t *testing.T) {
	ctx := context.Background()
	out, stderr, err := runPlugin(t, "enroll", "edge-preview", "--kubeconfig", userKubeconfig(t), "--context", "member",
		"--service-account", "preview-system/vidra", "--namespaces", "apps", "--dry-run=client", "-o", "yaml")
	if err != nil {
		t.Fatalf("enroll --dry-run=client: %v\n%s", err, stderr)
	}
	for _, want := range []string{"kind: ServiceAccount", "kind: ClusterRole", "kind: RoleBinding", "namespace: apps", "kind: Secret",
		"vidra.infrahub.operators.com/service-account: preview-system/vidra", "vidra.infrahub.operators.com/allowed-namespaces: apps"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run does not show %q:\n%s", want, out)
		}
	}
	if err := fleet.Members[0].Client.Get(ctx, client.ObjectKey{Name: "preview-system"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry run created the identity's namespace on the member: %v", err)
	}
	if _, ok := enrollmentSecret(t, "edge-preview"); ok {
		t.Error("the dry run wrote the Secret on the hub")
	}
	if _, _, err := runPlugin(t, "enroll", "edge-preview", "--kubeconfig", userKubeconfig(t), "--context", "member", "--cluster-kinds", "Namespace", "--dry-run=client"); err == nil ||
		!strings.Contains(err.Error(), "--cluster-kinds narrows an identity that --namespaces scopes") {
		t.Errorf("--cluster-kinds without --namespaces: %v", err)
	}
	if _, _, err := runPlugin(t, "enroll", "edge-preview", "--kubeconfig", userKubeconfig(t), "--context", "member", "--namespaces", "apps", "--cluster-kinds", "ConfigMap", "--dry-run=client"); err == nil ||
		!strings.Contains(err.Error(), "the kind is namespaced") {
		t.Errorf("a namespaced kind in --cluster-kinds: %v", err)
	}
}

// A ServiceAccount of that name that enroll did not create (an operator's own on the
// member) is neither taken over by enroll nor deleted by unenroll; a --context that is the
// hub is refused.
func TestEnrollLeavesAServiceAccountItDidNotCreate(t *testing.T) {
	ctx := context.Background()
	enrollmentNamespace(t)
	kc := userKubeconfig(t)
	member := fleet.Members[0].Client
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "operator"}},
	} {
		if err := member.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, _, err := runPlugin(t, "enroll", "edge-foreign", "--kubeconfig", kc, "--context", "member", "--service-account", "ops/operator")
	if err == nil || !strings.Contains(err.Error(), "was not created by kubectl vidra enroll") {
		t.Errorf("enroll over a foreign ServiceAccount: %v", err)
	}
	if _, ok := enrollmentSecret(t, "edge-foreign"); ok {
		t.Error("the refused enrollment wrote a Secret")
	}
	if out, stderr, err := runPlugin(t, "unenroll", "edge-foreign", "--kubeconfig", kc, "--context", "member", "--service-account", "ops/operator"); err != nil {
		t.Errorf("unenroll: %v\n%s%s", err, out, stderr)
	}
	if err := member.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "operator"}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("unenroll deleted a ServiceAccount enroll did not create: %v", err)
	}
	if _, _, err := runPlugin(t, "unenroll", "edge-foreign", "--kubeconfig", kc, "--context", "hub", "--service-account", "ops/operator"); err == nil ||
		!strings.Contains(err.Error(), "the hub and context \"hub\" are the same API server") {
		t.Errorf("unenroll with the hub as --context: %v", err)
	}
	if _, _, err := runPlugin(t, "enroll", "edge-foreign", "--kubeconfig", kc, "--context", "member", "--namespaces="); err == nil ||
		!strings.Contains(err.Error(), "--namespaces needs at least one namespace") {
		t.Errorf("enroll --namespaces= : %v", err)
	}
}
