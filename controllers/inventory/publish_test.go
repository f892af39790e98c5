package inventory_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/inventory"
	"github.com/vidra-operator/vidra/internal/test/clusterprofile"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// An enrolled cluster is published as a ClusterProfile in the namespace named: its
// labels, version, health as Vidra's probes see it, and its endpoint and CA under the
// access provider vidra, with no credential; it goes when the cluster is let go.
func TestAnEnrolledClusterIsPublishedAsAClusterProfile(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	member := fleet.Members[0]
	createNamespace(t, published)
	if err := testoperator.Enroll(ctx, fleet.Hub, member); err != nil {
		t.Fatal(err)
	}
	profile := &unstructured.Unstructured{}
	profile.SetGroupVersionKind(clusterprofile.GVK)
	waitHealth(t, profile, member.Name, "True")
	if got := profile.GetLabels()[inventory.ClusterManagerLabel]; got != inventory.ClusterManagerName {
		t.Errorf("label %s = %q", inventory.ClusterManagerLabel, got)
	}
	if got, _, _ := unstructured.NestedString(profile.Object, "spec", "clusterManager", "name"); got != inventory.ClusterManagerName {
		t.Errorf("spec.clusterManager.name = %q", got)
	}
	if got, _, _ := unstructured.NestedString(profile.Object, "status", "version", "kubernetes"); got == "" {
		t.Error("status.version.kubernetes is empty")
	}
	providers, _, _ := unstructured.NestedSlice(profile.Object, "status", "accessProviders")
	if len(providers) != 1 {
		t.Fatalf("status.accessProviders = %v, want vidra's alone", providers)
	}
	p := providers[0].(map[string]any)
	cluster, _ := p["cluster"].(map[string]any)
	if p["name"] != inventory.ClusterManagerName || cluster["server"] != strings.TrimSuffix(member.Server(), "/") ||
		cluster["certificate-authority-data"] != base64.StdEncoding.EncodeToString(member.Config.CAData) {
		t.Errorf("access provider = %v, want vidra's with %s and its CA", p, member.Server())
	}
	for k := range cluster {
		if k != "server" && k != "certificate-authority-data" && k != "tls-server-name" {
			t.Errorf("the published cluster holds %s", k)
		}
	}

	// Unreachable to Vidra's probes, it is published so, and healthy again once it answers.
	member.PauseInTest(t)
	waitHealth(t, profile, member.Name, "False")
	if err := member.Resume(); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, profile, member.Name, "True")

	// Let go, its profile goes.
	if err := hub.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testoperator.Namespace, Name: member.Name}}); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "ClusterProfile "+member.Name+" gone", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Namespace: published, Name: member.Name}, profile)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+member.Name+" gone", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: member.Name}, &vidrav1alpha1.VidraCluster{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// waitHealth waits until the published profile's ControlPlaneHealthy is status.
func waitHealth(t *testing.T, profile *unstructured.Unstructured, name, status string) {
	t.Helper()
	ctx := context.Background()
	testfleet.Eventually(t, 60*time.Second, "ClusterProfile "+published+"/"+name+" ControlPlaneHealthy "+status, func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: published, Name: name}, profile)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		conditions, _, _ := unstructured.NestedSlice(profile.Object, "status", "conditions")
		for _, c := range conditions {
			if c := c.(map[string]any); c["type"] == "ControlPlaneHealthy" && c["status"] == status {
				return true, nil
			}
		}
		return false, nil
	})
}
