package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// theOperatorActsOnlyAsListedAccounts delivers to the hub as a ServiceAccount the chart
// was not told of, named by an admin (who may impersonate it, so admission lets it
// through). Before, the operator held impersonate on every ServiceAccount and applied the
// bundle as it; now it may act only as the accounts the chart lists, and the API server
// refuses the rest.
func (h *sharedHub) theOperatorActsOnlyAsListedAccounts(t *testing.T) {
	ctx := context.Background()
	const ns, account = "team-local", "builder"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: account},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: account}}},
	}
	for _, o := range objs {
		if err := h.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	vr := bundle("as-unlisted-account", vidrav1alpha1.Destination{Namespace: ns}, configMap("built", "v"))
	vr.Spec.ServiceAccountName = account
	if err := h.admin.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, vr)
	testfleet.Eventually(t, objectsTimeout, vr.Name+" not applied, the operator refused to act as "+ns+"/"+account, func() (bool, error) {
		got := &vidrav1alpha1.VidraResource{}
		if err := h.admin.Get(ctx, client.ObjectKeyFromObject(vr), got); err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionReady)
		if ready != nil && ready.Status == metav1.ConditionFalse && strings.Contains(ready.Message, "cannot impersonate") && strings.Contains(ready.Message, account) {
			return true, nil
		}
		return false, fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "built"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the bundle was applied as %s/%s: %v", ns, account, err)
	}
}
