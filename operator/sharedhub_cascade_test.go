package operator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// heldFinalizer is a finalizer no controller removes: one added to a team's object holds
// its deletion until someone takes it off by hand.
const heldFinalizer = "tenant.example.com/hold"

// finalizersAreChanges is tried as a tenant who may update every VidraResource and sync
// but deliver to member 0 only. A finalizer on another team's object would hold its
// deletion. One on a VidraResource or sync with a cluster to check was refused already (an
// update needs deliver where the object delivers). Before, one on a VidraResource naming
// a server URL the operator had not matched yet was not: nothing was checked.
func (h *sharedHub) finalizersAreChanges(t *testing.T) {
	ctx := context.Background()
	m1 := h.fleet.Members[1].Name
	theirs := bundle("team-b-held", vidrav1alpha1.Destination{Cluster: m1, Namespace: "team-b-held"}, configMap("held", "v"))
	unmatched := bundle("team-b-unmatched", vidrav1alpha1.Destination{Server: "https://edge-9.example.com:6443", Namespace: "team-b-held"}, configMap("held", "v"))
	fanout := suspendedSync("team-b-fanout", vidrav1alpha1.InfrahubSyncDestination{ClusterSelector: &metav1.LabelSelector{}})
	mine := bundle("team-a-held", vidrav1alpha1.Destination{Server: "https://edge-8.example.com:6443", Namespace: "team-a-held"}, configMap("held", "v"))
	for _, o := range []client.Object{theirs, unmatched, fanout} {
		if err := h.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, o)
	}
	if err := h.tenant.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, mine)
	h.waitFor(t, unmatched.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonClusterNotFound)

	refused(t, addFinalizer(ctx, h.tenant, theirs), tenantUser+" may not deliver to cluster "+m1)
	refused(t, addFinalizer(ctx, h.tenant, fanout), tenantUser+" may not deliver to every cluster")
	refused(t, addFinalizer(ctx, h.tenant, unmatched), tenantUser+" may not change or delete VidraResource team-b-unmatched", "server URL the operator has not matched yet")
	refused(t, h.tenant.Delete(ctx, unmatched), tenantUser+" may not change or delete VidraResource team-b-unmatched")
	if err := addFinalizer(ctx, h.tenant, mine); err != nil {
		t.Fatalf("a finalizer on the tenant's own VidraResource was refused: %v", err)
	}
	patch := client.MergeFrom(mine.DeepCopy())
	mine.Finalizers = slices.DeleteFunc(mine.Finalizers, func(f string) bool { return f == heldFinalizer })
	if err := h.tenant.Patch(ctx, mine, patch); err != nil {
		t.Fatalf("the tenant could not take its own finalizer off: %v", err)
	}
}

// aDeletedSyncGoesWhateverTheCascade deletes syncs as kubectl delete --cascade=orphan and
// --cascade=foreground do, on a hub whose garbage collector acts as its own
// ServiceAccount, without deliver. Before, the collector was refused when it took the
// owner reference off the sync's VidraResources, and the orphaned sync never went.
func (h *sharedHub) aDeletedSyncGoesWhateverTheCascade(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground} {
		name := map[metav1.DeletionPropagation]string{metav1.DeletePropagationOrphan: "cascade-orphan", metav1.DeletePropagationForeground: "cascade-foreground"}[policy]
		sync := suspendedSync(name, vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name}})
		if err := h.admin.Create(ctx, sync); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, sync)
		vr := bundle(name, vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name, Namespace: name}, configMap(name, "v"))
		vr.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sync, vidrav1alpha1.GroupVersion.WithKind("InfrahubSync"))}
		if err := h.admin.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, vr)
		h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)

		if err := h.admin.Delete(ctx, sync, client.PropagationPolicy(policy)); err != nil {
			t.Fatal(err)
		}
		testfleet.Eventually(t, objectsTimeout, "InfrahubSync "+name+" deleted with propagation "+string(policy), func() (bool, error) {
			if err := h.admin.Get(ctx, client.ObjectKeyFromObject(sync), sync); err != nil {
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			}
			return false, fmt.Errorf("still there, finalizers %v", sync.Finalizers)
		})
		err := h.admin.Get(ctx, client.ObjectKeyFromObject(vr), vr)
		switch {
		case policy == metav1.DeletePropagationForeground && !apierrors.IsNotFound(err):
			t.Errorf("the VidraResource of a sync deleted in the foreground is still there: %v", err)
		case policy == metav1.DeletePropagationOrphan && err != nil:
			t.Errorf("the VidraResource of an orphaning delete: %v", err)
		case policy == metav1.DeletePropagationOrphan && len(vr.OwnerReferences) > 0:
			t.Errorf("the VidraResource of an orphaning delete still has owners %v", vr.OwnerReferences)
		}
	}
}

// suspendedSync is an InfrahubSync that fetches nothing: what is tried is admission and
// the garbage collector.
func suspendedSync(name string, dest vidrav1alpha1.InfrahubSyncDestination) *vidrav1alpha1.InfrahubSync {
	return &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", TargetBranch: "main", ArtefactName: "a"},
		Destination: dest,
		Suspend:     true,
	}}
}

func addFinalizer(ctx context.Context, c client.Client, o client.Object) error {
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	o.SetFinalizers(append(o.GetFinalizers(), heldFinalizer))
	return c.Patch(ctx, o, patch)
}
