package secret_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

func rotate(t *testing.T, name string, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	before := secret.DeepCopy()
	secret.Data[vidrav1alpha1.KubeconfigKey] = kubeconfig
	if err := fleet.Hub.Client.Patch(ctx, secret, client.MergeFrom(before)); err != nil {
		t.Fatalf("rotate kubeconfig of Secret %s: %v", name, err)
	}
}

func kubeconfigCurrent(status metav1.ConditionStatus, reason string) func(*vidrav1alpha1.VidraCluster) bool {
	return func(vc *vidrav1alpha1.VidraCluster) bool {
		c := meta.FindStatusCondition(vc.Status.Conditions, vidrav1alpha1.ConditionKubeconfigCurrent)
		return c != nil && c.Status == status && c.Reason == reason && vc.Status.Phase == vidrav1alpha1.ClusterEngaged
	}
}

func engagedCluster(t *testing.T, name string) cluster.Cluster {
	t.Helper()
	cl, err := provider.Get(context.Background(), multicluster.ClusterName(name))
	if err != nil {
		t.Fatalf("provider.Get(%s): %v", name, err)
	}
	return cl
}

func TestRotationToAWorkingKubeconfigReplacesTheCluster(t *testing.T) {
	member := fleet.Members[0]
	enroll(t, "edge-rotate-kubeconfig", "edge-rotate", member.Kubeconfig, nil)
	vidraCluster(t, "edge-rotate", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	old := engagedCluster(t, "edge-rotate")

	rotated, err := member.AddUser("rotated-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	rotate(t, "edge-rotate-kubeconfig", rotated)

	testfleet.Eventually(t, 15*time.Second, "the rotated kubeconfig is engaged", func() (bool, error) {
		cl, err := provider.Get(context.Background(), "edge-rotate")
		return err == nil && cl != old, err
	})
	next := engagedCluster(t, "edge-rotate")
	wantCert := currentUser(loadKubeconfig(t, rotated)).ClientCertificateData
	if !bytes.Equal(next.GetConfig().CertData, wantCert) {
		t.Error("the engaged cluster does not use the rotated client certificate")
	}
	vidraCluster(t, "edge-rotate", 10*time.Second, "shows the current kubeconfig", kubeconfigCurrent(metav1.ConditionTrue, "Rotated"))
}

func TestRotationToABrokenKubeconfigKeepsTheEngagedOne(t *testing.T) {
	member := fleet.Members[0]
	s := enroll(t, "edge-broken-kubeconfig", "edge-broken", member.Kubeconfig, nil)
	vidraCluster(t, "edge-broken", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	old := engagedCluster(t, "edge-broken")
	secrets := credentials(t, member.Kubeconfig)
	other := fleet.Members[1]
	enroll(t, "edge-other-kubeconfig", "edge-other", other.Kubeconfig, nil)
	vidraCluster(t, "edge-other", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))

	tests := []struct {
		name      string
		mutate    func(*clientcmdapi.Config)
		inMessage string
	}{
		{"unreachable server", func(c *clientcmdapi.Config) { currentCluster(c).Server = "https://127.0.0.1:1" }, "127.0.0.1:1"},
		{"exec plugin", func(c *clientcmdapi.Config) {
			currentUser(c).Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1"}
		}, "ExecPluginNotAllowed"},
		{"another enrolled cluster's server", func(c *clientcmdapi.Config) {
			*c = *loadKubeconfig(t, other.Kubeconfig)
		}, "already enrolled as cluster \"edge-other\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rotate(t, s.Name, mutateKubeconfig(t, member.Kubeconfig, tt.mutate))
			vc := vidraCluster(t, "edge-broken", 15*time.Second, "shows the failed rotation",
				kubeconfigCurrent(metav1.ConditionFalse, "RotationFailed"))
			if !strings.Contains(vc.Status.Message, tt.inMessage) {
				t.Errorf("message %q does not say why (%s)", vc.Status.Message, tt.inMessage)
			}
			if cl := engagedCluster(t, "edge-broken"); cl != old {
				t.Error("the engaged cluster was replaced by a broken kubeconfig")
			}
			note := warningEvent(t, s, "RotationFailed")
			for _, secret := range secrets {
				if strings.Contains(vc.Status.Message, secret) || strings.Contains(note, secret) {
					t.Error("a credential reached the VidraCluster status or an Event")
				}
			}
			// Back to the working kubeconfig: current again, same cluster.
			rotate(t, s.Name, member.Kubeconfig)
			vidraCluster(t, "edge-broken", 15*time.Second, "current again", kubeconfigCurrent(metav1.ConditionTrue, "Rotated"))
			if cl := engagedCluster(t, "edge-broken"); cl != old {
				t.Error("returning to the engaged kubeconfig replaced the cluster")
			}
		})
	}
}
