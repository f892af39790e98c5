package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// namesAreTheSyncsOwn is tried as a tenant who may deliver to member 0, beside team B's
// InfrahubSync delivering there too, whose VidraResource names anyone can work out. Before,
// the tenant created one under such a name with the sync as its controller (its UID is
// readable), and the sync adopted it as its own, the tenant's labels and annotations
// included. Now that owner is refused at apply; a VidraResource that takes the name
// without it is left alone, and both it and the sync say so, naming each other.
func (h *sharedHub) namesAreTheSyncsOwn(t *testing.T) {
	ctx := context.Background()
	m0 := h.fleet.Members[0].Name
	src := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(src.Close)
	src.Put("main", infrahubtest.Artifact{
		ID: "team-b-site-1", Name: "team-b-site", TargetLabel: "t1", DefinitionName: "team-b-site",
		Content: configMap("site", "b"),
	})
	sync := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: "team-b-site"}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: src.URL(), InsecureAllowHTTP: true, ArtefactName: "team-b-site"},
		Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m0, Namespace: "team-b-site"}},
		Interval:    &metav1.Duration{Duration: time.Hour},
	}}
	if err := h.admin.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, sync)
	h.syncCondition(t, sync.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)

	// The sync's VidraResource is gone while the sync is suspended: its name is free.
	name := h.suspendAndFree(t, sync)
	squat := func() *vidrav1alpha1.VidraResource {
		return bundle(name, vidrav1alpha1.Destination{Cluster: m0, Namespace: "team-a"}, configMap("squat", "a"))
	}
	adopted := squat()
	adopted.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sync, vidrav1alpha1.GroupVersion.WithKind("InfrahubSync"))}
	refused(t, h.tenant.Create(ctx, adopted), tenantUser+" may not make VidraResource "+name+" belong to InfrahubSync "+sync.Name)
	taken := squat()
	if err := h.tenant.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, taken)
	// A tenant's own VidraResource may not be given to the sync later either.
	patch := client.MergeFrom(taken.DeepCopy())
	taken.OwnerReferences = adopted.OwnerReferences
	refused(t, h.tenant.Patch(ctx, taken, patch), tenantUser+" may not make VidraResource "+name+" belong to InfrahubSync "+sync.Name)

	patch = client.MergeFrom(sync.DeepCopy())
	sync.Spec.Suspend = false
	if err := h.admin.Patch(ctx, sync, patch); err != nil {
		t.Fatal(err)
	}
	h.syncCondition(t, sync.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonBundleFailed,
		name, "was not made by this InfrahubSync (asked for by "+tenantUser+")", "not delivered to "+m0)
	h.eventOn(t, name, vidrav1alpha1.EventNameTaken, "InfrahubSync team-b-site gives its bundle for cluster "+m0)
	got := &vidrav1alpha1.VidraResource{}
	if err := h.admin.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Spec.Manifest != taken.Spec.Manifest {
		t.Errorf("the sync changed the VidraResource that took its name: owners %v, manifest %q", got.OwnerReferences, got.Spec.Manifest)
	}
}

// suspendAndFree suspends the sync, deletes the one VidraResource it made, and returns
// that name once it is gone.
func (h *sharedHub) suspendAndFree(t *testing.T, sync *vidrav1alpha1.InfrahubSync) string {
	t.Helper()
	ctx := context.Background()
	patch := client.MergeFrom(sync.DeepCopy())
	sync.Spec.Suspend = true
	if err := h.admin.Patch(ctx, sync, patch); err != nil {
		t.Fatal(err)
	}
	var list vidrav1alpha1.VidraResourceList
	if err := h.admin.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.InfrahubSyncLabel: sync.Name}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("InfrahubSync %s made %d VidraResources, want 1", sync.Name, len(list.Items))
	}
	vr := &list.Items[0]
	if err := h.admin.Delete(ctx, vr); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, objectsTimeout, "VidraResource "+vr.Name+" deleted", func() (bool, error) {
		err := h.admin.Get(ctx, client.ObjectKeyFromObject(vr), &vidrav1alpha1.VidraResource{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return vr.Name
}

// eventOn waits for an Event of the reason about the VidraResource, whose note says want.
func (h *sharedHub) eventOn(t *testing.T, name, reason, want string) {
	t.Helper()
	testfleet.Eventually(t, objectsTimeout, reason+" Event on VidraResource "+name, func() (bool, error) {
		var list eventsv1.EventList
		if err := h.admin.List(context.Background(), &list); err != nil {
			return false, err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "VidraResource" && e.Regarding.Name == name && e.Reason == reason {
				if strings.Contains(e.Note, want) {
					return true, nil
				}
				seen = append(seen, e.Note)
			}
		}
		return false, fmt.Errorf("notes %q", seen)
	})
}
