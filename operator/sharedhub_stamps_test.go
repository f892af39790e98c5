package operator_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// stampsHoldWithoutTheRequesterPolicy is tried as a tenant would, on a hub whose
// requester policy binding is gone (deleted by mistake, or never installed). Before, the
// tenant wrote someone else's name into requested-by, and the operator judged that person's
// rights; now the deliver policy refuses a stamp that names anyone but the requester.
func (h *sharedHub) stampsHoldWithoutTheRequesterPolicy(t *testing.T) {
	ctx := context.Background()
	h.withoutRequesterPolicy(t)
	stamp := func(user, groups string) *vidrav1alpha1.VidraResource {
		vr := bundle("tenant-stamps", vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name, Namespace: "team-a-stamps"}, configMap("s", "v"))
		vr.Annotations = map[string]string{vidrav1alpha1.RequestedByAnnotation: user, vidrav1alpha1.RequestedByGroupsAnnotation: groups}
		return vr
	}

	const why = "may name only itself, its own groups, UID and attributes there"
	refused(t, h.tenant.Create(ctx, stamp("system:admin", "system:masters"), client.DryRunAll), why)
	refused(t, h.tenant.Create(ctx, stamp(tenantUser, "system:masters"), client.DryRunAll), why)
	for _, forged := range []map[string]string{
		{vidrav1alpha1.RequestedByUIDAnnotation: "another-uid"},
		{vidrav1alpha1.RequestedByExtraAnnotation: "example.com/scope=everything"},
	} {
		vr := stamp(tenantUser, "system:authenticated")
		maps.Copy(vr.Annotations, forged)
		refused(t, h.tenant.Create(ctx, vr, client.DryRunAll), why)
	}
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

// stampsCarryAllOfWhoAsked is tried as a pipeline's ServiceAccount, whose token gives it
// a UID and extra attributes (the token's credential ID). Before, the stamps recorded only
// its name and groups, and the operator's SubjectAccessReviews judged someone without
// them, which an authorizer reading them (a webhook, a node-bound token's checks) would
// not have judged the same; now the requester policy records the UID and the attributes,
// the deliver policy refuses forged ones, and the operator asks about all of it.
func (h *sharedHub) stampsCarryAllOfWhoAsked(t *testing.T) {
	ctx := context.Background()
	m0 := h.fleet.Members[0]
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ci"}}
	if err := h.admin.Create(ctx, account); err != nil {
		t.Fatal(err)
	}
	h.person(t, "ci", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: account.Namespace, Name: account.Name}, []string{m0.Name})
	ci, err := client.New(serviceAccountToken(ctx, t, h.fleet.Hub.Config, account.Namespace, account.Name), client.Options{Scheme: h.admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	vr := bundle("ci-by-server", vidrav1alpha1.Destination{Server: m0.Server(), Namespace: "team-ci"}, configMap("ci", "v"))
	if err := ci.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, vr)
	if got := vr.Annotations[vidrav1alpha1.RequestedByUIDAnnotation]; got != string(account.UID) {
		t.Errorf("requested-by-uid = %q, want the ServiceAccount's UID %s", got, account.UID)
	}
	if got := vr.Annotations[vidrav1alpha1.RequestedByExtraAnnotation]; !strings.HasPrefix(got, "authentication.kubernetes.io/credential-id=JTI%3D") {
		t.Errorf("requested-by-extra = %q, want the token's credential ID", got)
	}
	// The operator asks whether that requester, UID and attributes included, may deliver
	// to the cluster the URL names: it may.
	h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)

	// Attributes written by hand are overwritten by the requester policy (refused without
	// it: stampsHoldWithoutTheRequesterPolicy), at creation and by any update.
	forged := bundle("ci-forged", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-ci"}, configMap("ci", "v"))
	forged.Annotations = map[string]string{vidrav1alpha1.RequestedByExtraAnnotation: "example.com/scope=everything"}
	if err := ci.Create(ctx, forged, client.DryRunAll); err != nil || forged.Annotations[vidrav1alpha1.RequestedByExtraAnnotation] != vr.Annotations[vidrav1alpha1.RequestedByExtraAnnotation] {
		t.Errorf("forged attributes: %v, stamped %q", err, forged.Annotations[vidrav1alpha1.RequestedByExtraAnnotation])
	}
	patch := client.MergeFrom(vr.DeepCopy())
	vr.Annotations[vidrav1alpha1.RequestedByUIDAnnotation] = "another-uid"
	if err := ci.Patch(ctx, vr, patch); err != nil || vr.Annotations[vidrav1alpha1.RequestedByUIDAnnotation] != string(account.UID) {
		t.Errorf("a UID rewritten by hand: %v, requested-by-uid %q; want the ServiceAccount's UID %s stamped again", err, vr.Annotations[vidrav1alpha1.RequestedByUIDAnnotation], account.UID)
	}
}

// withoutRequesterPolicy deletes the requester policy's binding and waits until the API
// server stops stamping; the returned restore (also run at clean-up, once) puts it back
// and waits until it stamps again.
func (h *sharedHub) withoutRequesterPolicy(t *testing.T) (restore func()) {
	t.Helper()
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	return h.withoutBinding(t, binding, chartRelease+"-deliver-requester", "the requester policy", func(inForce bool) func() (bool, error) {
		if inForce {
			return h.stampedAs(tenantUser)
		}
		return h.stampedAs("")
	})
}

// withoutBinding deletes the policy binding called name until restore is called (or the
// test ends), and waits until enforced(false) says the API server no longer enforces it;
// restore waits for enforced(true).
func (h *sharedHub) withoutBinding(t *testing.T, binding client.Object, name, what string, enforced func(bool) func() (bool, error)) (restore func()) {
	t.Helper()
	ctx := context.Background()
	if err := h.admin.Get(ctx, client.ObjectKey{Name: name}, binding); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			binding.SetResourceVersion("")
			binding.SetUID("")
			if err := h.admin.Create(ctx, binding); err != nil {
				t.Error(err)
				return
			}
			testfleet.Eventually(t, objectsTimeout, what+" back in force", enforced(true))
			h.afterTheGap(t)
		})
	}
	t.Cleanup(restore)
	// The API server stops enforcing it once its informer sees the binding gone.
	testfleet.Eventually(t, objectsTimeout, what+" out of force", enforced(false))
	return restore
}

// stampedAs reports whether the API server stamps the tenant's dry-run VidraResource
// as requested by want ("" while the requester policy is out of force).
func (h *sharedHub) stampedAs(want string) func() (bool, error) {
	return func() (bool, error) {
		vr := bundle("probe-requester-policy", vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name}, configMap("p", "v"))
		err := h.tenant.Create(context.Background(), vr, client.DryRunAll)
		return err == nil && vr.Annotations[vidrav1alpha1.RequestedByAnnotation] == want, err
	}
}

// afterTheGap waits until the operator has recorded that the policies recording who asks
// are back, and until the end of the gap it recorded (the margin past their return it
// distrusts too): a write from then on is trusted.
func (h *sharedHub) afterTheGap(t *testing.T) {
	t.Helper()
	var last admissionguard.Gap
	testfleet.Eventually(t, objectsTimeout, "the gap recorded as closed", func() (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := h.admin.Get(context.Background(), client.ObjectKey{Namespace: testoperator.Namespace, Name: admissionguard.GapStoreName}, cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		var gaps []admissionguard.Gap
		if err := json.Unmarshal([]byte(cm.Data["gaps"]), &gaps); err != nil {
			return false, err
		}
		if len(gaps) > 0 {
			last = gaps[len(gaps)-1]
		}
		return len(gaps) == 0 || !last.To.IsZero(), nil
	})
	time.Sleep(time.Until(last.To.Add(time.Second)))
}
