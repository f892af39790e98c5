package operator_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// otherRoutes tries the routes around the deliver checks that a hostile tenant (deliver on
// member 0 only) would try next.
func (h *sharedHub) otherRoutes(t *testing.T) {
	ctx := context.Background()
	m0, m1 := h.fleet.Members[0], h.fleet.Members[1]

	// Spellings of the hub's server that admission does not take for the hub are not the
	// hub for the operator either: nothing is applied, as nobody (the operator least).
	for name, server := range map[string]string{
		"hub-two-slashes": "https://kubernetes.default.svc//",
		"hub-kelvin":      "https://\u212Aubernetes.default.svc",
	} {
		vr := bundle(name, vidrav1alpha1.Destination{Server: server, Namespace: "default"}, configMap(name, "x"))
		vr.Spec.ServiceAccountName = "default"
		if err := h.tenant.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, vr)
		got := h.waitFor(t, name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonClusterNotFound)
		if c := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionReady); !strings.Contains(c.Message, "spelled https://kubernetes.default.svc") {
			t.Errorf("%s: Ready says %q", name, c.Message)
		}
		if err := h.admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s reached the hub: %v", name, err)
		}
	}

	// Another team's bundle that names its cluster by server URL: not deleted.
	theirs := bundle("theirs-by-server", vidrav1alpha1.Destination{Server: m1.Server(), Namespace: "team-e"}, configMap("theirs-by-server", "v"))
	if err := h.admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, theirs)
	h.waitFor(t, theirs.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	refused(t, h.tenant.Delete(ctx, theirs), "may not deliver to cluster "+m1.Name)

	// Another team's sync, taken to the tenant's cluster, would leave theirs: refused.
	sync := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: "theirs-sync"}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", TargetBranch: "main", ArtefactName: "a"},
		Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m1.Name}},
		Suspend:     true,
	}}
	if err := h.admin.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, sync)
	taken := sync.DeepCopy()
	taken.Spec.Destination.Cluster = m0.Name
	refused(t, h.tenant.Patch(ctx, taken, client.MergeFrom(sync)), "may not deliver to cluster "+m1.Name)

	// Nor made the tenant's sync's, by its label and owner reference.
	relabeled := &vidrav1alpha1.VidraResource{}
	if err := h.tenant.Get(ctx, client.ObjectKeyFromObject(theirs), relabeled); err != nil {
		t.Fatal(err)
	}
	relabeled.Labels = map[string]string{vidrav1alpha1.InfrahubSyncLabel: "tenant-sync"}
	refused(t, h.tenant.Update(ctx, relabeled), "may not deliver to cluster "+m1.Name)

	// Who asked is the API server's to write: a tenant that names someone else by an
	// update that keeps the spec is stamped with its own name by the requester policy.
	own := bundle("own-requester", vidrav1alpha1.Destination{Server: m0.Server(), Namespace: "team-g"}, configMap("own-requester", "v"))
	if err := h.tenant.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, own)
	h.waitFor(t, own.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	if err := h.tenant.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
		t.Fatal(err)
	}
	own.Annotations[vidrav1alpha1.RequestedByAnnotation] = "system:admin"
	if err := h.tenant.Update(ctx, own); err != nil || own.Annotations[vidrav1alpha1.RequestedByAnnotation] != tenantUser {
		t.Errorf("a stamp rewritten by the tenant: %v, requested-by %q; want it stamped %s again", err, own.Annotations[vidrav1alpha1.RequestedByAnnotation], tenantUser)
	}

	// The garbage collector deletes a deleted sync's VidraResources.
	gc := rest.CopyConfig(h.fleet.Hub.Config)
	gc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:generic-garbage-collector"}
	collector, err := client.New(gc, client.Options{Scheme: h.admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	orphan := bundle("collected", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-f"}, configMap("collected", "v"))
	if err := h.admin.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, orphan)
	if err := collector.Delete(ctx, orphan); err != nil {
		t.Errorf("the garbage collector was refused: %v", err)
	}

	// A group name with a comma stays one group when the operator asks about it.
	h.groupWithAComma(t)
}

// groupWithAComma: a person who may deliver to member 0 through a group whose name holds
// a comma delivers there by server URL.
func (h *sharedHub) groupWithAComma(t *testing.T) {
	ctx := context.Background()
	m0 := h.fleet.Members[0]
	const group = "cn=web,ou=teams"
	grouped := h.person(t, "grouped", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}, []string{m0.Name})
	vr := bundle("grouped-by-server", vidrav1alpha1.Destination{Server: m0.Server(), Namespace: "team-h"}, configMap("grouped", "v"))
	if err := grouped.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, vr)
	h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	testfleet.Eventually(t, objectsTimeout, "ConfigMap grouped on "+m0.Name, func() (bool, error) {
		err := m0.Client.Get(ctx, client.ObjectKey{Namespace: "team-h", Name: "grouped"}, &corev1.ConfigMap{})
		return err == nil, client.IgnoreNotFound(err)
	})
}
