package secret_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// enrollPull creates the enrollment Secret of a pull cluster (no credential), deleted
// when the test ends.
func enrollPull(t *testing.T, name, cluster string, data map[string][]byte) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels:      map[string]string{vidrav1alpha1.ClusterLabel: cluster, "site": "pull"},
			Annotations: map[string]string{vidrav1alpha1.ModeAnnotation: vidrav1alpha1.ModePull, vidrav1alpha1.AllowedNamespacesAnnotation: "apps"}},
		Data: data,
	}
	if err := fleet.Hub.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { retireSecret(t, s) })
	return s
}

// TestPullSecretHoldingACredentialIsRejected: the hub holds no credential for a pull
// cluster; a pull Secret with a kubeconfig is refused, saying so, and never engaged.
func TestPullSecretHoldingACredentialIsRejected(t *testing.T) {
	s := enrollPull(t, "pull-with-creds", "pull-with-creds", map[string][]byte{vidrav1alpha1.KubeconfigKey: fleet.Members[0].Kubeconfig})
	note := warningEvent(t, s, vidrav1alpha1.ReasonPullCredentials)
	vc := vidraCluster(t, "pull-with-creds", 10*time.Second, "Rejected", phaseIs(vidrav1alpha1.ClusterRejected))
	if readyReason(vc) != vidrav1alpha1.ReasonPullCredentials || !strings.Contains(note, "holds no credential") {
		t.Fatalf("reason %q, note %q", readyReason(vc), note)
	}
	for _, secret := range credentials(t, fleet.Members[0].Kubeconfig) {
		if strings.Contains(note, secret) || strings.Contains(vc.Status.Message, secret) {
			t.Fatal("a credential of the kubeconfig reached an Event or the status")
		}
	}
}

// TestPullClusterStandsByItsAgentsHeartbeat: a pull cluster is Pending until its agent
// first reports, Engaged while it reports within the agent timeout, and Unreachable once
// it is late, with the reason the hub can tell: silence, a token that expired, or an
// identity that is gone. The hub's ID is published for the agent.
func TestPullClusterStandsByItsAgentsHeartbeat(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	const name = "pull-site"
	enrollPull(t, name, name, nil)
	vc := vidraCluster(t, name, 10*time.Second, "Pending, no Lease", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Phase == vidrav1alpha1.ClusterPending && readyReason(vc) == vidrav1alpha1.ReasonAgentPending
	})
	if vc.Status.Mode != vidrav1alpha1.ClusterModePull || vc.Labels["site"] != "pull" || vc.Status.DeliveryPolicy == nil {
		t.Fatalf("pull VidraCluster: labels %v status %+v", vc.Labels, vc.Status)
	}

	// What enrollment makes on the hub: the namespace, the agent's identity, its Lease.
	ns := pull.Namespace(name)
	for _, obj := range pull.HubObjects(name, types.NamespacedName{Namespace: "vidra-system", Name: "vidra"}) {
		if err := hub.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	t.Cleanup(func() { _ = hub.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	beat := func(renewed time.Time, tokenExpires time.Time) {
		t.Helper()
		lease := &coordinationv1.Lease{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: pull.AgentName}, lease); err != nil {
			t.Fatal(err)
		}
		at := metav1.NewMicroTime(renewed)
		lease.Spec.RenewTime = &at
		lease.Annotations = map[string]string{pull.VersionAnnotation: "v1.0.0", pull.KubernetesVersionAnnotation: "v1.36.0",
			pull.TokenExpiresAnnotation: tokenExpires.UTC().Format(time.RFC3339)}
		if err := hub.Update(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	beat(time.Now(), time.Now().Add(time.Hour))
	vc = vidraCluster(t, name, 10*time.Second, "Engaged by its heartbeat", phaseIs(vidrav1alpha1.ClusterEngaged))
	if a := vc.Status.Agent; a == nil || a.Version != "v1.0.0" || a.Namespace != ns || !strings.Contains(a.Message, "v9.9.9") ||
		vc.Status.KubernetesVersion != "v1.36.0" || readyReason(vc) != vidrav1alpha1.ReasonAgentReporting {
		t.Fatalf("engaged pull VidraCluster: %+v, agent %+v", vc.Status, vc.Status.Agent)
	}
	cm := &corev1.ConfigMap{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: pull.HubInfoName}, cm); err != nil || cm.Data[pull.HubIDKey] != testHubID {
		t.Fatalf("the hub's ID for the agent: %v %v", cm.Data, err)
	}

	// Silent past the timeout (2s here): Unreachable, and why.
	vc = vidraCluster(t, name, 10*time.Second, "Unreachable once silent", phaseIs(vidrav1alpha1.ClusterUnreachable))
	if readyReason(vc) != vidrav1alpha1.ReasonAgentSilent {
		t.Fatalf("silent agent: reason %q, message %q", readyReason(vc), vc.Status.Message)
	}
	beat(time.Now().Add(-time.Minute), time.Now().Add(-time.Second))
	vidraCluster(t, name, 10*time.Second, "AgentTokenExpired", func(vc *vidrav1alpha1.VidraCluster) bool {
		return readyReason(vc) == vidrav1alpha1.ReasonAgentTokenExpired && strings.Contains(vc.Status.Message, "refuses the agent's token")
	})
	if err := hub.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pull.AgentName}}); err != nil {
		t.Fatal(err)
	}
	beat(time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	vidraCluster(t, name, 10*time.Second, "AgentIdentityMissing", func(vc *vidrav1alpha1.VidraCluster) bool {
		return readyReason(vc) == vidrav1alpha1.ReasonAgentIdentityMissing
	})
}

// TestPushAndPullSecretsOfOneNameConflict: a name is one cluster's, push or pull.
func TestPushAndPullSecretsOfOneNameConflict(t *testing.T) {
	first := enroll(t, "pull-dup-1-push", "pull-dup", fleet.Members[2].Kubeconfig, nil)
	vidraCluster(t, "pull-dup", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	later := enrollPull(t, "pull-dup-2-pull", "pull-dup", nil)
	note := warningEvent(t, later, vidrav1alpha1.ReasonDuplicateClusterName)
	if !strings.Contains(note, first.Name) {
		t.Fatalf("the duplicate's Event does not name the earlier Secret: %q", note)
	}
	vc := vidraCluster(t, "pull-dup", time.Second, "still the push Secret's", phaseIs(vidrav1alpha1.ClusterEngaged))
	if vc.Status.Mode != vidrav1alpha1.ClusterModePush || vc.Status.SecretRef.Name != first.Name {
		t.Fatalf("the push cluster's VidraCluster changed: %+v", vc.Status)
	}
}
