package main

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/runtime/version"
)

// operatorDeployment puts on the hub, in namespace, a Deployment of the operator as the
// chart makes it, running image.
func operatorDeployment(t *testing.T, namespace, image string) {
	t.Helper()
	ctx := context.Background()
	if err := client.IgnoreAlreadyExists(fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{operatorNameLabel: "vidra", "app.kubernetes.io/instance": "vidra"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "vidra", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vidra", Image: image}}},
			},
		},
	}
	if err := fleet.Hub.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), d) })
}

// kubectl vidra version names the plugin's version and the image the hub's operator runs;
// a hub it cannot read leaves the plugin's version, and says why.
func TestVersionNamesThePluginAndTheHubsOperator(t *testing.T) {
	operatorDeployment(t, "vidra-version", "registry.example:5000/platform/vidra:v0.9.0")
	kc := hubKubeconfig(t)
	client := "client: " + version.Get() + "\n"

	out, stderr, err := runPlugin(t, "version", "--kubeconfig", kc, "--namespace", "vidra-version")
	if want := client + "hub: v0.9.0 (registry.example:5000/platform/vidra:v0.9.0, deployment vidra-version/vidra)\n"; err != nil || out != want {
		t.Errorf("version: %v, printed %q (stderr %q), want %q", err, out, stderr, want)
	}
	if out, _, err := runPlugin(t, "version", "--client", "--kubeconfig", kc, "--namespace", "vidra-version"); err != nil || out != client {
		t.Errorf("version --client: %v, printed %q", err, out)
	}
	out, stderr, err = runPlugin(t, "version", "--kubeconfig", kc, "--namespace", "nowhere")
	if err != nil || out != client || !strings.Contains(stderr, "hub: unknown: no Vidra operator in namespace nowhere") {
		t.Errorf("version of a hub without an operator: %v, printed %q, said %q", err, out, stderr)
	}
}

// The agent enroll --pull installs runs the hub operator's image unless --agent-image
// names another; a development build that cannot read it is refused before anything is
// written, rather than name an image nobody built.
func TestThePullAgentRunsTheImageOfTheHubsOperator(t *testing.T) {
	operatorDeployment(t, "vidra-agent-image", "registry.example:5000/platform/vidra:v0.9.0")
	ctx := context.Background()
	var said strings.Builder
	o := &enrollOptions{}
	if image, err := o.agentImageFor(ctx, fleet.Hub.Client, "vidra-agent-image", &said); err != nil || image != "registry.example:5000/platform/vidra:v0.9.0" {
		t.Errorf("agent image: %q, %v", image, err)
	}
	if !strings.Contains(said.String(), "the image of the hub's operator (deployment vidra-agent-image/vidra)") {
		t.Errorf("enroll said %q", said.String())
	}
	o.agentImage = "mirror.example/vidra:v0.9.0"
	if image, err := o.agentImageFor(ctx, fleet.Hub.Client, "vidra-agent-image", &said); err != nil || image != o.agentImage {
		t.Errorf("--agent-image: %q, %v", image, err)
	}

	enrollmentNamespace(t)
	_, _, err := runPlugin(t, "enroll", "edge-agent-image", "--pull", "--kubeconfig", userKubeconfig(t), "--context", "member",
		"--hub-context", "hub", "--operator-service-account", "nowhere/vidra")
	if err == nil || !strings.Contains(err.Error(), "--agent-image: the hub's operator image could not be read") ||
		!strings.Contains(err.Error(), "is no release whose image could stand in") {
		t.Errorf("enroll --pull of a development build without an operator to read: %v", err)
	}
	if _, ok := enrollmentSecret(t, "edge-agent-image"); ok {
		t.Error("the refused enrollment wrote its Secret")
	}
}
