package secret_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

func TestEnrolledClusterIsEngagedAndShownWithItsVersion(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	s := enroll(t, "edge-basic-kubeconfig", "edge-basic", member.Kubeconfig, map[string]string{"site": "paris"})

	start := time.Now()
	vc := vidraCluster(t, "edge-basic", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	t.Logf("Secret created → VidraCluster Engaged in %v", time.Since(start).Round(time.Millisecond))

	wantServer, _ := kubeconfig.NormalizeServer(member.Server())
	if vc.Status.Server != wantServer || vc.Status.KubernetesVersion != "v1.36.0" {
		t.Errorf("status server %q version %q, want %q v1.36.0", vc.Status.Server, vc.Status.KubernetesVersion, wantServer)
	}
	if !maps.Equal(vc.Labels, map[string]string{"site": "paris"}) {
		t.Errorf("labels = %v, want the Secret's other labels {site: paris}", vc.Labels)
	}
	if ref := vc.Status.SecretRef; ref == nil || ref.Namespace != namespace || ref.Name != s.Name {
		t.Errorf("secretRef = %+v", ref)
	}
	if c := meta.FindStatusCondition(vc.Status.Conditions, vidrav1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition = %+v", c)
	}
	if vc.Status.LastProbeTime == nil {
		t.Error("no lastProbeTime")
	}
	if _, err := provider.Get(ctx, "edge-basic"); err != nil {
		t.Errorf("provider.Get: %v", err)
	}
	if v := metricValue(t, "vidra_cluster_ready", map[string]string{"cluster": "edge-basic"}); v != 1 {
		t.Errorf("vidra_cluster_ready = %v, want 1", v)
	}
	if v := metricValue(t, "vidra_cluster_engaged_total", nil); v < 1 {
		t.Errorf("vidra_cluster_engaged_total = %v, want at least 1", v)
	}

	// Controllers get requests for the cluster's Vidra-managed objects only: its cache is
	// label-selected.
	unmanaged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-vidras", Namespace: "default"}}
	managed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vidras", Namespace: "default",
		Labels: map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}}}
	for _, cm := range []*corev1.ConfigMap{unmanaged, managed} {
		if err := member.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = member.Client.Delete(ctx, cm) })
	}
	testfleet.Eventually(t, 10*time.Second, "controller sees the managed ConfigMap on edge-basic", func() (bool, error) {
		return seen.has("edge-basic", client.ObjectKeyFromObject(managed)), nil
	})
	if seen.has("edge-basic", client.ObjectKeyFromObject(unmanaged)) {
		t.Error("an object Vidra does not manage reached the controller")
	}
}

func TestLegacyLabelEnrollsWithADerivedName(t *testing.T) {
	createSecret(t, "legacy-kubeconfig", map[string]string{vidrav1alpha1.LegacyClusterLabel: "Edge-Legacy.Example.com"}, fleet.Members[0].Kubeconfig)
	vidraCluster(t, "edge-legacy-example-com", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
}

func TestDeletingTheSecretDisengagesTheCluster(t *testing.T) {
	s := enroll(t, "edge-delete-kubeconfig", "edge-delete", fleet.Members[0].Kubeconfig, nil)
	vidraCluster(t, "edge-delete", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))

	deleteSecret(t, s)
	vidraClusterGone(t, "edge-delete")
	assertDisengaged(t, "edge-delete")
}

func TestRemovingTheLabelDisengagesTheCluster(t *testing.T) {
	ctx := context.Background()
	s := enroll(t, "edge-unlabel-kubeconfig", "edge-unlabel", fleet.Members[0].Kubeconfig, nil)
	vidraCluster(t, "edge-unlabel", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))

	before := s.DeepCopy()
	delete(s.Labels, vidrav1alpha1.ClusterLabel)
	if err := fleet.Hub.Client.Patch(ctx, s, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	vidraClusterGone(t, "edge-unlabel")
	assertDisengaged(t, "edge-unlabel")
	testfleet.Eventually(t, 10*time.Second, "unlabeled Secret forgotten", func() (bool, error) {
		return !provider.Enrolls(types.NamespacedName{Namespace: namespace, Name: s.Name}), nil
	})
}

func assertDisengaged(t *testing.T, name multicluster.ClusterName) {
	t.Helper()
	testfleet.Eventually(t, 10*time.Second, string(name)+" disengaged", func() (bool, error) {
		_, err := provider.Get(context.Background(), name)
		return errors.Is(err, multicluster.ErrClusterNotFound), err
	})
	if v := metricValue(t, "vidra_cluster_ready", map[string]string{"cluster": string(name)}); v != -1 {
		t.Errorf("vidra_cluster_ready{cluster=%q} = %v after disengage, want no series", name, v)
	}
}
