package operator_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// clusterLabelsAreTheAdmins is tried as a tenant would. tenant-a holds the team role
// docs/security.md used to show, with every write on vidraclusters. Member 1 is another
// team's, labeled team=b on its enrollment Secret, where a team-b sync selects it. Before,
// the tenant's relabeling drew team-b's syncs onto member 0 or made them prune member 1;
// now every write of a VidraCluster but the operator's is refused, a cluster admin's too,
// and the labels follow the enrollment Secret alone.
func (h *sharedHub) clusterLabelsAreTheAdmins(t *testing.T) {
	ctx := context.Background()
	m0, m1 := h.fleet.Members[0].Name, h.fleet.Members[1].Name
	testoperator.LabelCluster(t, h.admin, m1, "team", "b") // the operator's copy passes
	t.Cleanup(func() { testoperator.LabelCluster(t, h.admin, m1, "team", "") })

	const why = "VidraClusters are written by the Vidra operator alone"
	relabel := func(c client.Client, name string, labels func(map[string]string)) error {
		vc := &vidrav1alpha1.VidraCluster{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, vc); err != nil {
			t.Fatal(err)
		}
		before := vc.DeepCopy()
		if vc.Labels == nil {
			vc.Labels = map[string]string{}
		}
		labels(vc.Labels)
		return c.Patch(ctx, vc, client.MergeFrom(before))
	}
	refused(t, relabel(h.tenant, m0, func(l map[string]string) { l["team"] = "b" }), tenantUser+" may not update VidraCluster "+m0, why, "enrollment Secret")
	refused(t, relabel(h.tenant, m1, func(l map[string]string) { delete(l, "team") }), why)
	refused(t, relabel(h.admin, m0, func(l map[string]string) { l["team"] = "b" }), why)
	squat := &vidrav1alpha1.VidraCluster{ObjectMeta: metav1.ObjectMeta{Name: "squatted", Labels: map[string]string{"team": "b"}}}
	refused(t, h.tenant.Create(ctx, squat), "may not create VidraCluster squatted", why)
	refused(t, h.tenant.Delete(ctx, &vidrav1alpha1.VidraCluster{ObjectMeta: metav1.ObjectMeta{Name: m1}}), "may not delete VidraCluster "+m1, why)

	for name, want := range map[string]string{m0: "", m1: "b"} {
		vc := &vidrav1alpha1.VidraCluster{}
		if err := h.admin.Get(ctx, client.ObjectKey{Name: name}, vc); err != nil {
			t.Fatal(err)
		}
		if vc.Labels["team"] != want {
			t.Errorf("VidraCluster %s has team=%q, want %q: only its enrollment Secret labels it", name, vc.Labels["team"], want)
		}
	}
}
