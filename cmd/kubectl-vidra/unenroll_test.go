package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// enrollmentSecretNaming writes an enrollment Secret on the hub; with an identity, its
// annotation names it as enroll's does, else it holds copied credentials.
func enrollmentSecretNaming(t *testing.T, name, serviceAccount string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: name,
		Labels: map[string]string{vidrav1alpha1.ClusterLabel: name}}, Data: map[string][]byte{vidrav1alpha1.KubeconfigKey: []byte("not read")}}
	if serviceAccount != "" {
		s.Annotations = map[string]string{vidrav1alpha1.ServiceAccountAnnotation: serviceAccount}
	}
	if err := fleet.Hub.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	deleteSecretAtEnd(t, name)
}

// What unenroll does with a Secret of copied credentials (warns that they stay valid,
// needs no --context), with one naming an identity but no --context (refuses, deleting
// nothing), with a server dry run (deletes nothing) and with a dry run it does not know.
func TestUnenrollSaysWhatItCannotRemoveAndDeletesNothingOnADryRun(t *testing.T) {
	enrollmentNamespace(t)
	kc := userKubeconfig(t)
	enrollmentSecretNaming(t, "edge-copied", "")
	enrollmentSecretNaming(t, "edge-named", "vidra-system/vidra")

	if _, _, err := runPlugin(t, "unenroll", "edge-copied", "--kubeconfig", kc, "--context", "hub", "--dry-run", "client"); err == nil ||
		!strings.Contains(err.Error(), `--dry-run must be "none" or "server", not "client"`) {
		t.Errorf("--dry-run client: %v", err)
	}
	out, stderr, err := runPlugin(t, "unenroll", "edge-copied", "--kubeconfig", kc, "--hub-context", "hub", "--dry-run", "server")
	if err != nil || out != "secret/edge-copied deleted (server dry run) (on the hub)\n" || !strings.Contains(stderr, "holds copied credentials") {
		t.Errorf("server dry run: %v, printed %q, warned %q", err, out, stderr)
	}
	if _, ok := enrollmentSecret(t, "edge-copied"); !ok {
		t.Error("a server dry run deleted the Secret")
	}
	out, stderr, err = runPlugin(t, "unenroll", "edge-copied", "--kubeconfig", kc, "--hub-context", "hub")
	if err != nil || out != "secret/edge-copied deleted (on the hub)\n" || !strings.Contains(stderr, "they stay valid on the member until you revoke them") {
		t.Errorf("unenroll of copied credentials: %v, printed %q, warned %q", err, out, stderr)
	}
	if _, ok := enrollmentSecret(t, "edge-copied"); ok {
		t.Error("the Secret of copied credentials is still there")
	}

	if _, _, err := runPlugin(t, "unenroll", "edge-named", "--kubeconfig", kc, "--hub-context", "hub"); err == nil ||
		!strings.Contains(err.Error(), "names the identity vidra-system/vidra on the member: pass --context") {
		t.Errorf("unenroll of an identity without --context: %v", err)
	}
	if _, ok := enrollmentSecret(t, "edge-named"); !ok {
		t.Error("the refused unenroll deleted the Secret")
	}
}
