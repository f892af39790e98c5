package v1alpha1_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// columns splits a line of kubectl's table output into its cells.
func columns(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}

// row returns the table row whose first cell is name, split into cells.
func row(t *testing.T, table, name string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if cells := columns(line); cells[0] == name {
			return cells
		}
	}
	t.Fatalf("no row %q in:\n%s", name, table)
	return nil
}

func header(table string) []string {
	return columns(strings.SplitN(table, "\n", 2)[0])
}

func equal(a, b []string) bool {
	return strings.Join(a, "|") == strings.Join(b, "|")
}

// TestKubectlGetShowsTheFleetColumns: `kubectl get vidraresources`, `infrahubsyncs` and
// `vidraclusters` print the columns a person needs, short names work, and
// `kubectl get vidra` lists all three kinds.
func TestKubectlGetShowsTheFleetColumns(t *testing.T) {
	ctx := context.Background()
	lastSync := metav1.NewTime(time.Now().Add(-72 * time.Hour))

	vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "printer-web"}}
	vr.Spec.Destination.Cluster = "edge-1"
	if err := hub.Client.Create(ctx, vr); err != nil {
		t.Fatalf("create VidraResource: %v", err)
	}
	vr.Status = vidrav1alpha1.VidraResourceStatus{
		Cluster: "edge-1", DeployState: vidrav1alpha1.StateSucceeded, ResourceCount: 3, LastSyncTime: &lastSync,
	}
	if err := hub.Client.Status().Update(ctx, vr); err != nil {
		t.Fatalf("update VidraResource status: %v", err)
	}

	ihs := validSync()
	ihs.GenerateName, ihs.Name = "", "printer-sync"
	ihs.Spec.Source.TargetBranch = "feature-x"
	if err := hub.Client.Create(ctx, ihs); err != nil {
		t.Fatalf("create InfrahubSync: %v", err)
	}
	ihs.Status = vidrav1alpha1.InfrahubSyncStatus{SyncState: vidrav1alpha1.StateRunning, LastSyncTime: &lastSync,
		Rollout: &vidrav1alpha1.RolloutStatus{Revision: 4, Phase: vidrav1alpha1.RolloutProgressing}}
	if err := hub.Client.Status().Update(ctx, ihs); err != nil {
		t.Fatalf("update InfrahubSync status: %v", err)
	}

	vc := &vidrav1alpha1.VidraCluster{ObjectMeta: metav1.ObjectMeta{Name: "edge-1",
		Labels: map[string]string{vidrav1alpha1.InventoryLabel: "cluster-api"}}}
	if err := hub.Client.Create(ctx, vc); err != nil {
		t.Fatalf("create VidraCluster: %v", err)
	}
	vc.Status = vidrav1alpha1.VidraClusterStatus{
		Phase: vidrav1alpha1.ClusterEngaged, Server: "https://edge-1.example.com:6443", KubernetesVersion: "v1.36.0",
		Mode: vidrav1alpha1.ClusterModePush,
	}
	if err := hub.Client.Status().Update(ctx, vc); err != nil {
		t.Fatalf("update VidraCluster status: %v", err)
	}

	tests := []struct {
		args       []string
		name       string
		wantHeader []string
		wantRow    []string // without the AGE cell, which depends on timing
	}{
		{[]string{"get", "vidraresources"}, "printer-web",
			[]string{"NAME", "CLUSTER", "STATE", "RESOURCES", "LAST SYNC", "AGE"},
			[]string{"printer-web", "edge-1", "Succeeded", "3", "3d"}},
		{[]string{"get", "vr"}, "printer-web",
			[]string{"NAME", "CLUSTER", "STATE", "RESOURCES", "LAST SYNC", "AGE"},
			[]string{"printer-web", "edge-1", "Succeeded", "3", "3d"}},
		{[]string{"get", "infrahubsyncs"}, "printer-sync",
			[]string{"NAME", "ARTIFACT", "BRANCH", "STATE", "REVISION", "ROLLOUT", "LAST SYNC", "AGE"},
			[]string{"printer-sync", "manifests", "feature-x", "Running", "4", "Progressing", "3d"}},
		{[]string{"get", "ihs"}, "printer-sync",
			[]string{"NAME", "ARTIFACT", "BRANCH", "STATE", "REVISION", "ROLLOUT", "LAST SYNC", "AGE"},
			[]string{"printer-sync", "manifests", "feature-x", "Running", "4", "Progressing", "3d"}},
		{[]string{"get", "vidraclusters"}, "edge-1",
			[]string{"NAME", "SERVER", "PHASE", "VERSION", "MODE", "INVENTORY", "AGE"},
			[]string{"edge-1", "https://edge-1.example.com:6443", "Engaged", "v1.36.0", "Push", "cluster-api"}},
		{[]string{"get", "vc"}, "edge-1",
			[]string{"NAME", "SERVER", "PHASE", "VERSION", "MODE", "INVENTORY", "AGE"},
			[]string{"edge-1", "https://edge-1.example.com:6443", "Engaged", "v1.36.0", "Push", "cluster-api"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := hub.Kubectl(ctx, nil, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := header(out); !equal(got, tt.wantHeader) {
				t.Errorf("header = %q, want %q\n%s", got, tt.wantHeader, out)
			}
			if got := row(t, out, tt.name); !equal(got[:len(got)-1], tt.wantRow) {
				t.Errorf("row = %q, want %q followed by the age\n%s", got, tt.wantRow, out)
			}
		})
	}

	t.Run("get vidra", func(t *testing.T) {
		out, err := hub.Kubectl(ctx, nil, "get", "vidra")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"vidraresource.infrahub.operators.com/printer-web",
			"infrahubsync.infrahub.operators.com/printer-sync",
			"vidracluster.infrahub.operators.com/edge-1",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get vidra lacks %s:\n%s", want, out)
			}
		}
	})
}
