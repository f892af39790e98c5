package secret_test

import (
	"testing"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// TestUnreachableClusterDoesNotHoldUpOthers: a member whose API server stops answering
// becomes Unreachable (and Engaged again when it answers), while another member still
// enrolls in its usual time.
func TestUnreachableClusterDoesNotHoldUpOthers(t *testing.T) {
	paused, other := fleet.Members[1], fleet.Members[2]
	enroll(t, "edge-health-kubeconfig", "edge-health", paused.Kubeconfig, nil)
	vidraCluster(t, "edge-health", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))

	paused.PauseInTest(t)
	vc := vidraCluster(t, "edge-health", 20*time.Second, "Unreachable", phaseIs(vidrav1alpha1.ClusterUnreachable))
	if readyReason(vc) != "Unreachable" {
		t.Errorf("Ready reason = %q, want Unreachable", readyReason(vc))
	}
	if v := metricValue(t, "vidra_cluster_ready", map[string]string{"cluster": "edge-health"}); v != 0 {
		t.Errorf("vidra_cluster_ready = %v, want 0", v)
	}

	start := time.Now()
	enroll(t, "edge-while-paused-kubeconfig", "edge-while-paused", other.Kubeconfig, nil)
	vidraCluster(t, "edge-while-paused", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	t.Logf("enrolled another member in %v while one was unreachable", time.Since(start).Round(time.Millisecond))

	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	vidraCluster(t, "edge-health", 20*time.Second, "Engaged again", phaseIs(vidrav1alpha1.ClusterEngaged))
	if v := metricValue(t, "vidra_cluster_ready", map[string]string{"cluster": "edge-health"}); v != 1 {
		t.Errorf("vidra_cluster_ready = %v after resume, want 1", v)
	}
}
