package secret_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestAnIdleClusterCostsTheHubNoWrites: probes that find an engaged cluster as it was
// write nothing to its VidraCluster (a fleet of a thousand would otherwise cost the hub
// two writes a minute each), while vidra_cluster_last_probe_timestamp_seconds moves; a
// probe that finds a change writes it, with its time.
func TestAnIdleClusterCostsTheHubNoWrites(t *testing.T) {
	member := fleet.Members[2]
	enroll(t, "edge-idle-kubeconfig", "edge-idle", member.Kubeconfig, nil)
	vidraCluster(t, "edge-idle", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	time.Sleep(time.Second) // what engagement writes, written
	vc := vidraCluster(t, "edge-idle", time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	if vc.Status.LastProbeTime == nil {
		t.Fatal("no lastProbeTime once engaged")
	}
	firstProbe := metricValue(t, "vidra_cluster_last_probe_timestamp_seconds", map[string]string{"cluster": "edge-idle"})

	// Ten probe intervals, across several seconds: lastProbeTime has a resolution of a
	// second, so a probe a second later would change it if it were written.
	time.Sleep(3 * time.Second)
	idle := vidraCluster(t, "edge-idle", time.Second, "still Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	if idle.ResourceVersion != vc.ResourceVersion {
		t.Errorf("the VidraCluster was written while nothing changed: resourceVersion %s -> %s, lastProbeTime %v -> %v",
			vc.ResourceVersion, idle.ResourceVersion, vc.Status.LastProbeTime, idle.Status.LastProbeTime)
	}
	if probed := metricValue(t, "vidra_cluster_last_probe_timestamp_seconds", map[string]string{"cluster": "edge-idle"}); probed <= firstProbe {
		t.Errorf("vidra_cluster_last_probe_timestamp_seconds = %v, not after %v: the probes do not show", probed, firstProbe)
	}

	member.PauseInTest(t)
	down := vidraCluster(t, "edge-idle", 20*time.Second, "Unreachable", phaseIs(vidrav1alpha1.ClusterUnreachable))
	if !down.Status.LastProbeTime.After(idle.Status.LastProbeTime.Time) {
		t.Errorf("lastProbeTime = %v once Unreachable, want later than %v", down.Status.LastProbeTime, idle.Status.LastProbeTime)
	}
	if err := member.Resume(); err != nil {
		t.Fatal(err)
	}
	vidraCluster(t, "edge-idle", 20*time.Second, "Engaged again", phaseIs(vidrav1alpha1.ClusterEngaged))
}

// TestAClusterHeardFromIsNotProbed: while a cluster's watch brings news, its API server
// has answered, so it is not probed as well (an idle fleet's watch bookmarks save it as
// many requests); once the watch falls silent the probes come back, and a paused cluster
// goes Unreachable as ever.
func TestAClusterHeardFromIsNotProbed(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	enroll(t, "edge-heard-kubeconfig", "edge-heard", member.Kubeconfig, nil)
	vidraCluster(t, "edge-heard", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	cl, err := provider.Get(ctx, "edge-heard")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "heard", Namespace: "default",
		Labels: map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}}}
	if err := member.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Client.Delete(context.Background(), cm) })
	probes := func() float64 {
		return metricValue(t, "vidra_cluster_probes_total", map[string]string{"cluster": "edge-heard"})
	}

	// Ten probe intervals (300ms) of a change every 50ms, seen by the cluster's watch.
	before := probes()
	for i := range 60 {
		cm.Data = map[string]string{"i": strconv.Itoa(i)}
		if err := member.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	busy := probes() - before

	before = probes()
	time.Sleep(3 * time.Second)
	quiet := probes() - before
	t.Logf("probes in ten intervals: %v while heard from, %v once quiet", busy, quiet)
	if busy > 3 {
		t.Errorf("probed %v times in ten intervals while its watch brought news", busy)
	}
	if quiet < 5 {
		t.Errorf("probed %v times in ten quiet intervals", quiet)
	}

	member.PauseInTest(t)
	vidraCluster(t, "edge-heard", 20*time.Second, "Unreachable", phaseIs(vidrav1alpha1.ClusterUnreachable))
	if err := member.Resume(); err != nil {
		t.Fatal(err)
	}
	vidraCluster(t, "edge-heard", 20*time.Second, "Engaged again", phaseIs(vidrav1alpha1.ClusterEngaged))
}
