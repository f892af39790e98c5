package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl vidra import argocd lists what each Argo CD cluster Secret would enroll, and
// why the operator would refuse the others, printing no credential.
func TestImportArgoCDSaysWhatWouldBeEnrolled(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	const ns = "argocd-import"
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for name, data := range map[string]map[string]string{
		"cluster-prod":     {"name": "prod", "server": "https://10.0.0.1:6443", "config": `{"bearerToken":"s3cr3t","tlsClientConfig":{"caData":"Q0E="}}`},
		"cluster-eks":      {"name": "eks", "server": "https://eks.example.com", "config": `{"execProviderConfig":{"command":"argocd-k8s-auth"}}`},
		"cluster-insecure": {"name": "lab", "server": "https://10.0.0.9", "config": `{"bearerToken":"s3cr3t","tlsClientConfig":{"insecure":true}}`},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
			StringData: data}
		if err := hub.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := runPlugin(t, "import", "argocd", "--argocd-namespace", ns, "--kubeconfig="+hubKubeconfig(t))
	if err != nil {
		t.Fatalf("import argocd: %v\n%s", err, out)
	}
	for _, want := range []string{
		"cluster-prod       prod", ns + ".prod", "enrolled, with a scoped identity",
		"cluster-eks", "refused: its config.execProviderConfig runs a program",
		"cluster-insecure", "refused (InsecureTLSNotAllowed)",
		"1 of 3 would be enrolled with --cluster-inventory=argocd --cluster-inventory-namespaces=" + ns,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("a credential was printed:\n%s", out)
	}
}
