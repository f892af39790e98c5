package vidraresource_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestALostClusterIsNoLongerWatchedUntilReconciledAgain: when another replica takes a
// cluster over, this one stops watching it; reconciling it again watches it again.
func TestALostClusterIsNoLongerWatchedUntilReconciledAgain(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	name := multicluster.ClusterName(member.Name)
	deliver(t, "moved", vidrav1alpha1.Destination{Cluster: member.Name, ReconcileOnEvents: true}, cmManifest("moved"))
	ready(t, "moved")
	if !slices.Contains(watches.Watched(name), "ConfigMap") {
		t.Fatalf("ConfigMaps of %s not watched: %v", member.Name, watches.Watched(name))
	}

	watches.Forget(name)
	if got := watches.Watched(name); len(got) != 0 {
		t.Fatalf("still watching %v on %s", got, member.Name)
	}

	updateSpec(t, "moved", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = cmManifest("moved") + "  # again\n" })
	testfleet.Eventually(t, 10*time.Second, "ConfigMaps watched again", func() (bool, error) {
		return slices.Contains(watches.Watched(name), "ConfigMap"), nil
	})
	cm := &corev1.ConfigMap{}
	exists(t, member, cm, "default", "moved")
	cm.Data["k"] = "edited by hand"
	if err := member.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 10*time.Second, "drift repaired again", func() (bool, error) {
		got := &corev1.ConfigMap{}
		return exists(t, member, got, "default", "moved") && got.Data["k"] == "v", nil
	})
}

// TestAGainedClustersVidraResourcesAreRequeued: a replica that comes to own a cluster
// requeues the VidraResources delivering to it, found through the index of its cache,
// and no others.
func TestAGainedClustersVidraResourcesAreRequeued(t *testing.T) {
	ctx := context.Background()
	first, second := fleet.Members[0].Name, fleet.Members[1].Name
	deliver(t, "gained-first", vidrav1alpha1.Destination{Cluster: first}, cmManifest("gained-first"))
	deliver(t, "gained-second", vidrav1alpha1.Destination{Cluster: second}, cmManifest("gained-second"))
	ready(t, "gained-first")
	ready(t, "gained-second")
	local, err := engaged.GetCluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := vidraresource.RequeuedOnGain(local.GetClient(), multicluster.ClusterName(first))
	if !slices.Contains(got, "gained-first") || slices.Contains(got, "gained-second") {
		t.Fatalf("gaining %s requeued %v: want gained-first, not gained-second", first, got)
	}
}
