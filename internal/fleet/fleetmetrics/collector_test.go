package fleetmetrics_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/fleetmetrics"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

var fleet *testfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) { fleet = f }))
}

func ready(status metav1.ConditionStatus, generation int64) []metav1.Condition {
	return []metav1.Condition{{Type: vidrav1alpha1.ConditionReady, Status: status, Reason: "Test", ObservedGeneration: generation, LastTransitionTime: metav1.Now()}}
}

// The collector shows the hub's objects as the API server has them: a Ready VidraResource,
// one Ready for an older generation only, an InfrahubSync that is not Ready and whose
// rollout failed, a Ready GitSync and its VidraResource, a suspended OCISync (no series),
// a HelmSync that is not Ready; and a deleted object's series go with it.
func TestCollectorShowsTheFleetAsTheHubHasIt(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
	for _, name := range []string{"web", "db"} {
		vr := &vidrav1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{vidrav1alpha1.InfrahubSyncLabel: "site"}},
			Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-1"}, Manifest: manifest},
		}
		if err := hub.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		vr.Status.Cluster = "edge-1"
		vr.Status.Conditions = ready(metav1.ConditionTrue, vr.Generation)
		if name == "db" {
			vr.Status.Conditions = ready(metav1.ConditionTrue, vr.Generation-1) // not for this generation
		}
		if err := hub.Status().Update(ctx, vr); err != nil {
			t.Fatal(err)
		}
	}
	ihs := &vidrav1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source:   vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", ArtefactName: "web"},
			Interval: &metav1.Duration{Duration: time.Hour},
		},
	}
	if err := hub.Create(ctx, ihs); err != nil {
		t.Fatal(err)
	}
	ihs.Status.Conditions = ready(metav1.ConditionFalse, ihs.Generation)
	ihs.Status.Rollout = &vidrav1alpha1.RolloutStatus{Revision: 3, Phase: vidrav1alpha1.RolloutFailed}
	if err := hub.Status().Update(ctx, ihs); err != nil {
		t.Fatal(err)
	}

	gs := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Spec:       vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/site.git"}},
	}
	if err := hub.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	gs.Status.Conditions = ready(metav1.ConditionTrue, gs.Generation)
	gs.Status.Rollout = &vidrav1alpha1.RolloutStatus{Revision: 1, Phase: vidrav1alpha1.RolloutCompleted}
	if err := hub.Status().Update(ctx, gs); err != nil {
		t.Fatal(err)
	}
	fromGit := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "site-edge-1", Labels: map[string]string{vidrav1alpha1.GitSyncLabel: "site"}},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-1"}, Manifest: manifest},
	}
	if err := hub.Create(ctx, fromGit); err != nil {
		t.Fatal(err)
	}
	ocis := &vidrav1alpha1.OCISync{
		ObjectMeta: metav1.ObjectMeta{Name: "suspended"},
		Spec: vidrav1alpha1.OCISyncSpec{Source: vidrav1alpha1.OCISource{URL: "oci://registry.example.com/site"},
			SyncOptions: vidrav1alpha1.SyncOptions{Suspend: true}},
	}
	if err := hub.Create(ctx, ocis); err != nil {
		t.Fatal(err)
	}
	hs := &vidrav1alpha1.HelmSync{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress"},
		Spec:       vidrav1alpha1.HelmSyncSpec{Source: vidrav1alpha1.HelmSource{RepoURL: "https://charts.example.com", Chart: "ingress"}},
	}
	if err := hub.Create(ctx, hs); err != nil {
		t.Fatal(err)
	}
	hs.Status.Conditions = ready(metav1.ConditionFalse, hs.Generation)
	if err := hub.Status().Update(ctx, hs); err != nil {
		t.Fatal(err)
	}

	// A suspended VidraResource is neither Ready nor failing: no series.
	suspended := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "paused"},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-1"}, Manifest: manifest, Suspend: true},
	}
	if err := hub.Create(ctx, suspended); err != nil {
		t.Fatal(err)
	}
	// A cluster never engaged shows its phase; one whose renewal is due, how late it is.
	for _, vc := range []*vidrav1alpha1.VidraCluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}, Status: vidrav1alpha1.VidraClusterStatus{Phase: vidrav1alpha1.ClusterEngaged,
			Identity: &vidrav1alpha1.ClusterIdentity{Type: vidrav1alpha1.IdentityServiceAccount, RenewAt: &metav1.Time{Time: time.Now().Add(-time.Hour)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "edge-2"}, Status: vidrav1alpha1.VidraClusterStatus{Phase: vidrav1alpha1.ClusterUnreachable}},
	} {
		status := vc.Status
		if err := hub.Create(ctx, vc); err != nil {
			t.Fatal(err)
		}
		vc.Status = status
		if err := hub.Status().Update(ctx, vc); err != nil {
			t.Fatal(err)
		}
	}

	c := fleetmetrics.New(hub, logr.Discard())
	want := `
# HELP vidra_resource_ready 1 when the VidraResource is Ready for its current generation, else 0; absent while suspended. sync_kind and sync name the sync that made it, if any.
# TYPE vidra_resource_ready gauge
vidra_resource_ready{cluster="edge-1",sync="site",sync_kind="InfrahubSync",vidraresource="db"} 0
vidra_resource_ready{cluster="edge-1",sync="site",sync_kind="InfrahubSync",vidraresource="web"} 1
vidra_resource_ready{cluster="",sync="site",sync_kind="GitSync",vidraresource="site-edge-1"} 0
# HELP vidra_rollout_failed 1 while the sync's progressive rollout is Failed or RolledBack, else 0; absent for syncs without a rollout.
# TYPE vidra_rollout_failed gauge
vidra_rollout_failed{kind="GitSync",sync="site"} 0
vidra_rollout_failed{kind="InfrahubSync",sync="site"} 1
# HELP vidra_sync_ready 1 when the sync (kind InfrahubSync, GitSync, OCISync or HelmSync) is Ready for its current generation, else 0; absent while suspended.
# TYPE vidra_sync_ready gauge
vidra_sync_ready{kind="GitSync",sync="site"} 1
vidra_sync_ready{kind="HelmSync",sync="ingress"} 0
vidra_sync_ready{kind="InfrahubSync",sync="site"} 0
# HELP vidra_cluster_phase 1 for the phase the enrolled cluster's VidraCluster shows (Engaged, Unreachable, Rejected), whether or not it was ever engaged.
# TYPE vidra_cluster_phase gauge
vidra_cluster_phase{cluster="edge-1",phase="Engaged"} 1
vidra_cluster_phase{cluster="edge-2",phase="Unreachable"} 1
# HELP vidra_fleet_metrics_list_failed 1 when the last scrape could not read a kind from the cache (its series are missing then), by kind.
# TYPE vidra_fleet_metrics_list_failed gauge
vidra_fleet_metrics_list_failed{kind="GitSync"} 0
vidra_fleet_metrics_list_failed{kind="HelmSync"} 0
vidra_fleet_metrics_list_failed{kind="InfrahubSync"} 0
vidra_fleet_metrics_list_failed{kind="OCISync"} 0
vidra_fleet_metrics_list_failed{kind="VidraCluster"} 0
vidra_fleet_metrics_list_failed{kind="VidraResource"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vidra_resource_ready", "vidra_rollout_failed", "vidra_sync_ready", "vidra_cluster_phase", "vidra_fleet_metrics_list_failed"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "vidra_cluster_credential_renewal_overdue_seconds"); n != 1 {
		t.Errorf("%d renewal series, want one, for edge-1", n)
	}

	for _, sync := range []ctrlclient.Object{ihs, gs, hs} {
		if err := hub.Delete(ctx, sync); err != nil {
			t.Fatal(err)
		}
	}
	if n := testutil.CollectAndCount(c, "vidra_sync_ready", "vidra_rollout_failed"); n != 0 {
		t.Errorf("%d series of deleted syncs", n)
	}
}
