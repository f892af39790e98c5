package operator_test

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// stampsHoldWithoutTheRequesterPolicy is tried as a tenant would, on a hub whose
// requester policy binding is gone (deleted by mistake, or never installed). Before, the
// tenant wrote someone else's name into requested-by, and the operator judged that person's
// rights; now the deliver policy refuses a stamp that names anyone but the requester.
func (h *sharedHub) stampsHoldWithoutTheRequesterPolicy(t *testing.T) {
	ctx := context.Background()
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	if err := h.admin.Get(ctx, client.ObjectKey{Name: chartRelease + "-deliver-requester"}, binding); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	stamp := func(user, groups string) *vidrav1alpha1.VidraResource {
		vr := bundle("tenant-stamps", vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name, Namespace: "team-a-stamps"}, configMap("s", "v"))
		vr.Annotations = map[string]string{vidrav1alpha1.RequestedByAnnotation: user, vidrav1alpha1.RequestedByGroupsAnnotation: groups}
		return vr
	}
	// The API server stops stamping once its informer sees the binding gone.
	testfleet.Eventually(t, objectsTimeout, "the requester policy out of force", func() (bool, error) {
		vr := stamp(tenantUser, "system:authenticated")
		vr.Annotations = nil
		err := h.tenant.Create(ctx, vr, client.DryRunAll)
		return err == nil && vr.Annotations[vidrav1alpha1.RequestedByAnnotation] == "", err
	})
	t.Cleanup(func() {
		binding.ResourceVersion, binding.UID = "", ""
		if err := h.admin.Create(ctx, binding); err != nil {
			t.Error(err)
			return
		}
		testfleet.Eventually(t, objectsTimeout, "the requester policy back in force", func() (bool, error) {
			vr := stamp("", "")
			vr.Annotations = nil
			err := h.tenant.Create(ctx, vr, client.DryRunAll)
			return err == nil && vr.Annotations[vidrav1alpha1.RequestedByAnnotation] == tenantUser, err
		})
	})

	const why = "may name only itself and its own groups there"
	refused(t, h.tenant.Create(ctx, stamp("system:admin", "system:masters"), client.DryRunAll), why)
	refused(t, h.tenant.Create(ctx, stamp(tenantUser, "system:masters"), client.DryRunAll), why)
	if err := h.tenant.Create(ctx, stamp(tenantUser, "system:authenticated"), client.DryRunAll); err != nil {
		t.Errorf("the tenant's own stamp was refused: %v", err)
	}
}

// statusIsTheOperators is tried as a tenant whose role lets it write the status of
// VidraResources (as a role with "*" on them would). Before, it set
// status.cluster of its own VidraResource, which the deliver policy reads as the cluster
// a server URL names; now every status write but the operator's is refused.
func (h *sharedHub) statusIsTheOperators(t *testing.T) {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-writes-status"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{vidrav1alpha1.GroupVersion.Group},
			Resources: []string{"vidraresources/status"},
			Verbs:     []string{"get", "update", "patch"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-writes-status"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenantUser}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := h.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, o)
	}
	vr := bundle("tenant-status", vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name, Namespace: "team-a-status"}, configMap("st", "v"))
	if err := h.tenant.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, vr)
	h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	if err := h.tenant.Get(ctx, client.ObjectKeyFromObject(vr), vr); err != nil {
		t.Fatal(err)
	}
	before := vr.DeepCopy()
	vr.Status.Cluster = h.fleet.Members[1].Name
	refused(t, h.tenant.Status().Patch(ctx, vr, client.MergeFrom(before)), tenantUser+" may not write the status of vidraresources tenant-status", "the Vidra operator alone")
}
