package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
)

const secretNamespace = "vidra-system"

// userKubeconfig writes the kubeconfig a fleet admin has: context "hub" (current), context
// "member" whose certificates are files beside the kubeconfig (relative paths, as minikube
// and kubeadm write them), context "exec-member" whose user runs an exec plugin, and
// context "token-file-member" whose user reads a token file.
func userKubeconfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	hub, err := clientcmd.Load(fleet.Hub.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	member, err := clientcmd.Load(fleet.Members[0].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hubCluster, hubUser := only(hub)
	memberCluster, memberUser := only(member)

	// The member's certificates go to files, referenced by relative paths.
	for name, data := range map[string][]byte{
		"member-ca.crt": memberCluster.CertificateAuthorityData, "member.crt": memberUser.ClientCertificateData, "member.key": memberUser.ClientKeyData,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	memberCluster.CertificateAuthorityData, memberCluster.CertificateAuthority = nil, "member-ca.crt"
	memberUser.ClientCertificateData, memberUser.ClientCertificate = nil, "member.crt"
	memberUser.ClientKeyData, memberUser.ClientKey = nil, "member.key"

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"], cfg.Clusters["member"] = hubCluster, memberCluster
	cfg.AuthInfos["hub-admin"], cfg.AuthInfos["member-admin"] = hubUser, memberUser
	cfg.AuthInfos["exec-user"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "vidra-test-credentials", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	cfg.AuthInfos["token-file-user"] = &clientcmdapi.AuthInfo{TokenFile: "member.token"}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "hub-admin"}
	cfg.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "member-admin"}
	cfg.Contexts["exec-member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "exec-user"}
	cfg.Contexts["token-file-member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "token-file-user"}
	cfg.Clusters["member-unchecked"] = &clientcmdapi.Cluster{Server: memberCluster.Server, InsecureSkipTLSVerify: true}
	cfg.Contexts["insecure-member"] = &clientcmdapi.Context{Cluster: "member-unchecked", AuthInfo: "member-admin"}
	cfg.CurrentContext = "hub"
	path := filepath.Join(dir, "config")
	// Written as bytes, not with clientcmd.WriteToFile, which would make the paths absolute.
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// only returns the single cluster and user of an envtest kubeconfig.
func only(cfg *clientcmdapi.Config) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {
	ctx := cfg.Contexts[cfg.CurrentContext]
	return cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
}

// enrollmentNamespace makes sure the operator's namespace exists on the hub.
func enrollmentNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}
	if err := fleet.Hub.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func enrollmentSecret(t *testing.T, name string) (*corev1.Secret, bool) {
	t.Helper()
	s := &corev1.Secret{}
	err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: secretNamespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

func deleteSecretAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		_ = fleet.Hub.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: name}})
	})
}

func TestEnrollWritesASingleContextKubeconfigThatReachesTheMember(t *testing.T) {
	enrollmentNamespace(t)
	deleteSecretAtEnd(t, "edge-1")
	out, stderr, err := runPlugin(t, "enroll", "--copy-credentials", "edge-1", "--kubeconfig", userKubeconfig(t), "--context", "member", "--labels", "site=paris,tier=edge")
	if err != nil {
		t.Fatalf("enroll: %v\n%s", err, stderr)
	}
	if want := "secret/edge-1 created; watch it with: kubectl get vidraclusters edge-1\n"; out != want {
		t.Errorf("enroll printed %q, want %q", out, want)
	}

	secret, ok := enrollmentSecret(t, "edge-1")
	if !ok {
		t.Fatal("no Secret edge-1 on the hub")
	}
	wantLabels := map[string]string{vidrav1alpha1.ClusterLabel: "edge-1", "site": "paris", "tier": "edge"}
	if len(secret.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want %v", secret.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if secret.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, secret.Labels[k], v)
		}
	}
	if len(secret.Data) != 1 || secret.Data[vidrav1alpha1.KubeconfigKey] == nil {
		t.Fatalf("data keys %v, want only %q", secret.Data, vidrav1alpha1.KubeconfigKey)
	}

	data := secret.Data[vidrav1alpha1.KubeconfigKey]
	raw, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("stored kubeconfig does not parse: %v", err)
	}
	if len(raw.Contexts) != 1 || len(raw.Clusters) != 1 || len(raw.AuthInfos) != 1 || raw.CurrentContext != "member" {
		t.Errorf("stored kubeconfig: current %q, %d contexts, %d clusters, %d users; want member alone",
			raw.CurrentContext, len(raw.Contexts), len(raw.Clusters), len(raw.AuthInfos))
	}
	cluster, user := only(raw)
	if len(cluster.CertificateAuthorityData) == 0 || len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0 ||
		cluster.CertificateAuthority != "" || user.ClientCertificate != "" || user.ClientKey != "" {
		t.Errorf("certificates are not inline in the stored kubeconfig")
	}

	// The operator's policy accepts it, and it reaches the member.
	cfg, err := kubeconfig.Load(data, kubeconfig.Policy{})
	if err != nil {
		t.Fatalf("the operator's policy refuses the stored kubeconfig: %v", err)
	}
	if want, _ := kubeconfig.NormalizeServer(fleet.Members[0].Server()); cfg.Server != want {
		t.Errorf("stored kubeconfig names server %s, want the member's %s", cfg.Server, want)
	}
	cs, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("the stored kubeconfig does not reach the member: %v", err)
	}
}

func TestEnrollRefusesWhatTheOperatorWouldRefuseAndWritesNothing(t *testing.T) {
	enrollmentNamespace(t)
	kubeconfigFile := userKubeconfig(t)
	for _, tc := range []struct {
		context string
		words   []string
	}{
		{"exec-member", []string{"exec plugin", "vidra-test-credentials", "ExecPluginNotAllowed", "--allow-exec"}},
		{"token-file-member", []string{"tokenFile", "FileReference"}},
		{"insecure-member", []string{"insecure-skip-tls-verify", "InsecureTLSNotAllowed", "--allow-insecure-tls"}},
		{"no-such-context", []string{`context "no-such-context" is not in kubeconfig`, "exec-member, hub, insecure-member, member, token-file-member"}},
	} {
		t.Run(tc.context, func(t *testing.T) {
			out, _, err := runPlugin(t, "enroll", "--copy-credentials", "edge-refused", "--kubeconfig", kubeconfigFile, "--context", tc.context)
			if err == nil {
				t.Fatalf("enroll of %s succeeded: %s", tc.context, out)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, ok := enrollmentSecret(t, "edge-refused"); ok {
				t.Errorf("a Secret was written for a refused context")
			}
		})
	}
}

func TestEnrollDryRunPrintsTheSecretAndContactsNoHub(t *testing.T) {
	// The hub's kubeconfig does not exist: a dry run that touched the hub would fail.
	out, stderr, err := runPlugin(t, "enroll", "--copy-credentials", "edge-dry", "--kubeconfig", userKubeconfig(t), "--context", "member",
		"--hub-kubeconfig", "/nonexistent/kubeconfig", "--labels", "site=oslo", "--dry-run=client", "-o", "yaml")
	if err != nil {
		t.Fatalf("enroll --dry-run=client: %v\n%s", err, stderr)
	}
	var secret corev1.Secret
	if err := yaml.UnmarshalStrict([]byte(out), &secret); err != nil {
		t.Fatalf("dry run output is not a Secret: %v\n%s", err, out)
	}
	if secret.APIVersion != "v1" || secret.Kind != "Secret" || secret.Name != "edge-dry" || secret.Namespace != secretNamespace ||
		secret.Labels[vidrav1alpha1.ClusterLabel] != "edge-dry" || secret.Labels["site"] != "oslo" {
		t.Errorf("dry run printed:\n%s", out)
	}
	if _, err := kubeconfig.Load(secret.Data[vidrav1alpha1.KubeconfigKey], kubeconfig.Policy{}); err != nil {
		t.Errorf("printed kubeconfig: %v", err)
	}
	if _, ok := enrollmentSecret(t, "edge-dry"); ok {
		t.Errorf("a dry run wrote the Secret")
	}

	// --allow-exec lets an exec context through, and says what the operator then needs.
	out, stderr, err = runPlugin(t, "enroll", "--copy-credentials", "edge-dry", "--kubeconfig", userKubeconfig(t), "--context", "exec-member",
		"--hub-kubeconfig", "/nonexistent/kubeconfig", "--dry-run=client", "--allow-exec")
	if err != nil || out != "secret/edge-dry created (dry run)\n" || !strings.Contains(stderr, "--allow-kubeconfig-exec") {
		t.Errorf("enroll --allow-exec --dry-run=client: err %v, stdout %q, stderr %q", err, out, stderr)
	}

	// So does --allow-insecure-tls for a context that does not check the certificate.
	out, stderr, err = runPlugin(t, "enroll", "--copy-credentials", "edge-dry", "--kubeconfig", userKubeconfig(t), "--context", "insecure-member",
		"--hub-kubeconfig", "/nonexistent/kubeconfig", "--dry-run=client", "--allow-insecure-tls")
	if err != nil || out != "secret/edge-dry created (dry run)\n" || !strings.Contains(stderr, "--allow-insecure-tls") {
		t.Errorf("enroll --allow-insecure-tls --dry-run=client: err %v, stdout %q, stderr %q", err, out, stderr)
	}
}

func TestEnrollLeavesAnExistingSecretAloneUnlessOverwrite(t *testing.T) {
	enrollmentNamespace(t)
	deleteSecretAtEnd(t, "edge-2")
	previous := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: "edge-2", Labels: map[string]string{vidrav1alpha1.ClusterLabel: "edge-2", "site": "old"}},
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: []byte("previous")},
	}
	if err := fleet.Hub.Client.Create(context.Background(), previous); err != nil {
		t.Fatal(err)
	}
	kubeconfigFile := userKubeconfig(t)

	_, _, err := runPlugin(t, "enroll", "--copy-credentials", "edge-2", "--kubeconfig", kubeconfigFile, "--context", "member", "--labels", "site=new")
	if err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("got %v, want a refusal that names --overwrite", err)
	}
	if s, _ := enrollmentSecret(t, "edge-2"); string(s.Data[vidrav1alpha1.KubeconfigKey]) != "previous" || s.Labels["site"] != "old" {
		t.Errorf("the existing Secret was changed without --overwrite")
	}

	out, stderr, err := runPlugin(t, "enroll", "--copy-credentials", "edge-2", "--kubeconfig", kubeconfigFile, "--context", "member", "--labels", "site=new", "--overwrite")
	if err != nil {
		t.Fatalf("enroll --overwrite: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, "secret/edge-2 configured") {
		t.Errorf("enroll --overwrite printed %q", out)
	}
	s, _ := enrollmentSecret(t, "edge-2")
	if s.Labels["site"] != "new" || s.Labels[vidrav1alpha1.ClusterLabel] != "edge-2" {
		t.Errorf("labels after --overwrite: %v", s.Labels)
	}
	if _, err := kubeconfig.Load(s.Data[vidrav1alpha1.KubeconfigKey], kubeconfig.Policy{}); err != nil {
		t.Errorf("kubeconfig after --overwrite: %v", err)
	}
}

func TestEnrollRefusesToWriteTheSecretOnTheMemberItself(t *testing.T) {
	_, _, err := runPlugin(t, "enroll", "edge-3", "--kubeconfig", userKubeconfig(t), "--context", "member", "--hub-context", "member")
	if err == nil || !strings.Contains(err.Error(), "same API server") {
		t.Fatalf("got %v, want a refusal to use the member as the hub", err)
	}
}

func TestEnrollRefusesASecondSecretForTheSameCluster(t *testing.T) {
	enrollmentNamespace(t)
	deleteSecretAtEnd(t, "edge-4-old")
	other := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: "edge-4-old", Labels: map[string]string{vidrav1alpha1.ClusterLabel: "edge-4"}},
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: []byte("x")},
	}
	if err := fleet.Hub.Client.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	_, _, err := runPlugin(t, "enroll", "edge-4", "--kubeconfig", userKubeconfig(t), "--context", "member")
	if err == nil || !strings.Contains(err.Error(), "already enrolled by secret vidra-system/edge-4-old") {
		t.Fatalf("got %v, want a refusal naming the Secret that enrolls edge-4", err)
	}
	if _, ok := enrollmentSecret(t, "edge-4"); ok {
		t.Errorf("a second Secret for edge-4 was written")
	}
}

func TestEnrollChecksItsArguments(t *testing.T) {
	kubeconfigFile := userKubeconfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"enroll", "edge-5", "--kubeconfig", kubeconfigFile}, `"context" not set`},
		{[]string{"enroll", "Edge_5", "--kubeconfig", kubeconfigFile, "--context", "member"}, `cluster name "Edge_5"`},
		{[]string{"enroll", "edge-5", "--kubeconfig", kubeconfigFile, "--context", "member", "--labels", vidrav1alpha1.ClusterLabel + "=x"}, "set from NAME"},
		{[]string{"enroll", "edge-5", "--kubeconfig", kubeconfigFile, "--context", "member", "--dry-run=maybe"}, `--dry-run must be`},
	} {
		_, _, err := runPlugin(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
