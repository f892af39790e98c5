package fleetmetrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/fleet/fleetmetrics"
)

// A pull member's agent may read VidraResources and nothing else of Vidra's on its
// cluster: its collector reads them alone, and reports no kind it cannot read as failed.
func TestAnAgentsCollectorReadsOnlyVidraResources(t *testing.T) {
	ctx := context.Background()
	const agent = "fleetmetrics-agent"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: agent}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"infrahub.operators.com"}, Resources: []string{"vidraresources"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: agent},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: agent},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: agent}}}
	for _, o := range []ctrlclient.Object{role, binding} {
		if err := fleet.Hub.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(fleet.Hub.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: agent}
	reader, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: fleet.Hub.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	want := `
# HELP vidra_fleet_metrics_list_failed 1 when the last scrape could not read a kind from the cache (its series are missing then), by kind.
# TYPE vidra_fleet_metrics_list_failed gauge
vidra_fleet_metrics_list_failed{kind="VidraResource"} 0
`
	resourcesOnly := fleetmetrics.New(reader, logr.Discard()).ResourcesOnly()
	if err := testutil.CollectAndCompare(resourcesOnly, strings.NewReader(want), "vidra_fleet_metrics_list_failed"); err != nil {
		t.Error(err)
	}
	// The whole fleet's collector, under the agent's rights, fails on the rest.
	wantFull := strings.Replace(want, `{kind="VidraResource"} 0`, `{kind="GitSync"} 1
vidra_fleet_metrics_list_failed{kind="HelmSync"} 1
vidra_fleet_metrics_list_failed{kind="InfrahubSync"} 1
vidra_fleet_metrics_list_failed{kind="OCISync"} 1
vidra_fleet_metrics_list_failed{kind="VidraCluster"} 1
vidra_fleet_metrics_list_failed{kind="VidraResource"} 0`, 1)
	full := fleetmetrics.New(reader, logr.Discard())
	if err := testutil.CollectAndCompare(full, strings.NewReader(wantFull), "vidra_fleet_metrics_list_failed"); err != nil {
		t.Error(err)
	}
}
