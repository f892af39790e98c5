package vidraresource_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestDeletionWaitsForAnUnreachableCluster: the objects cannot be released while their
// cluster does not answer; the VidraResource says so and goes once it answers.
func TestDeletionWaitsForAnUnreachableCluster(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	deliver(t, "patient", vidrav1alpha1.Destination{Cluster: member.Name}, cmManifest("patient"))
	ready(t, "patient")

	member.PauseInTest(t)
	if err := fleet.Hub.Client.Delete(ctx, &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "patient"}}); err != nil {
		t.Fatal(err)
	}
	vr := condition(t, "patient", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonDeleting)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "releasing") && !strings.Contains(msg, "waiting") {
		t.Errorf("message %q does not say the deletion waits", msg)
	}
	if err := member.Resume(); err != nil {
		t.Fatal(err)
	}
	remove(t, "patient")
	gone(t, member, &corev1.ConfigMap{}, "default", "patient")
}

// TestDeletingAResourceThatNeverReachedItsClusterCompletes: nothing was applied, so
// nothing holds the deletion, even though the destination still does not resolve.
func TestDeletingAResourceThatNeverReachedItsClusterCompletes(t *testing.T) {
	deliver(t, "nowhere", vidrav1alpha1.Destination{Server: "https://nowhere.example.com:6443"}, cmManifest("nowhere"))
	condition(t, "nowhere", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonClusterNotFound)
	remove(t, "nowhere")
}

// TestDriftWatchesFollowTheKindsInUse: a kind is watched on a cluster while some
// VidraResource uses it there, and no longer once none does.
func TestDriftWatchesFollowTheKindsInUse(t *testing.T) {
	member := fleet.Members[1]
	name := multicluster.ClusterName(member.Name)
	deliver(t, "watched", vidrav1alpha1.Destination{Cluster: member.Name, ReconcileOnEvents: true},
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: watched, namespace: default}\n")
	ready(t, "watched")
	if !slices.Contains(watches.Watched(name), "ServiceAccount") {
		t.Fatalf("watched kinds on %s = %v, want ServiceAccount", name, watches.Watched(name))
	}
	updateSpec(t, "watched", func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.Manifest = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: watched, namespace: default}\n---\n" + cmManifest("watched")
	})
	testfleet.Eventually(t, 10*time.Second, "ConfigMaps watched too", func() (bool, error) {
		return slices.Contains(watches.Watched(name), "ConfigMap"), nil
	})
	remove(t, "watched")
	if slices.Contains(watches.Watched(name), "ServiceAccount") {
		t.Errorf("ServiceAccounts still watched on %s after their only user went: %v", name, watches.Watched(name))
	}
}

// TestImpersonationDeniedByRBACIsReported: every request on the destination is made as
// the named service account, so what RBAC denies it is reported, and applied once granted.
func TestImpersonationDeniedByRBACIsReported(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	deliver(t, "limited", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "default"}, cmManifest("limited"),
		func(vr *vidrav1alpha1.VidraResource) { vr.Spec.ServiceAccountName = "deployer" })
	vr := condition(t, "limited", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonApplyFailed)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "system:serviceaccount:default:deployer") || !strings.Contains(msg, "forbidden") {
		t.Errorf("message %q does not say the service account was denied", msg)
	}
	if exists(t, member, &corev1.ConfigMap{}, "default", "limited") {
		t.Fatal("an object was applied with rights the service account does not have")
	}

	if err := member.Client.Create(ctx, deployerRole()); err != nil {
		t.Fatal(err)
	}
	if err := member.Client.Create(ctx, deployerBinding()); err != nil {
		t.Fatal(err)
	}
	// Failures back off; a change of the VidraResource retries at once.
	updateSpec(t, "limited", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest += "# granted\n" })
	ready(t, "limited")
	cm := &corev1.ConfigMap{}
	if !exists(t, member, cm, "default", "limited") || !owned(t, cm, "hub/limited") {
		t.Errorf("after the grant: %v", cm.Annotations)
	}
}

func deployerRole() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "default"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
}

func deployerBinding() *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: "default"}},
	}
}
