package vidraresource_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// crashAfterRecording leaves a VidraResource as an operator stopped mid-reconcile would:
// its inventory records objects; applied, when created, means the object was created by
// the apply but the operator stopped before adding itself to the owners set. The
// VidraResource is suspended meanwhile, as a stopped operator does nothing.
func crashAfterRecording(t *testing.T, name string, member string, recorded []string, created []string) {
	t.Helper()
	ctx := context.Background()
	deliver(t, name, vidrav1alpha1.Destination{Cluster: member}, cmManifest(recorded[0]),
		func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Suspend = true })
	condition(t, name, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended)
	vr := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: name}, vr); err != nil {
		t.Fatal(err)
	}
	for _, cm := range recorded {
		vr.Status.ManagedResources = append(vr.Status.ManagedResources,
			vidrav1alpha1.ManagedResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: cm})
	}
	if err := fleet.Hub.Client.Status().Update(ctx, vr); err != nil {
		t.Fatal(err)
	}
	for _, cm := range created {
		createUnjoined(t, member, cm)
	}
}

// createUnjoined creates a ConfigMap in default on a member as an apply that stopped
// before joining it leaves it: labeled managed by Vidra, in no owners set.
func createUnjoined(t *testing.T, member, name string) {
	t.Helper()
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		Labels: map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}}}
	if err := memberNamed(member).Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// TestCrashBetweenRecordingAndJoiningLeavesNoOrphan: an object created by an apply whose
// operator stopped before joining it, and dropped from the bundle meanwhile, is pruned
// when the operator is back.
func TestCrashBetweenRecordingAndJoiningLeavesNoOrphan(t *testing.T) {
	member := fleet.Members[0]
	crashAfterRecording(t, "crashy", member.Name, []string{"crash-a"}, []string{"crash-a"})
	updateSpec(t, "crashy", func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.Suspend = false
		vr.Spec.Manifest = cmManifest("crash-b")
	})
	vr := ready(t, "crashy")
	gone(t, member, &corev1.ConfigMap{}, "default", "crash-a")
	cm := &corev1.ConfigMap{}
	if !exists(t, member, cm, "default", "crash-b") || !owned(t, cm, "hub/crashy") {
		t.Errorf("crash-b: %v", cm.Annotations)
	}
	if len(vr.Status.ManagedResources) != 1 || vr.Status.ManagedResources[0].Name != "crash-b" {
		t.Errorf("managedResources = %+v", vr.Status.ManagedResources)
	}
}

// TestCrashBeforeApplyingCompletesTheApply: an object recorded but never applied is
// applied and joined when the operator is back.
func TestCrashBeforeApplyingCompletesTheApply(t *testing.T) {
	member := fleet.Members[0]
	crashAfterRecording(t, "crashy-2", member.Name, []string{"crash-c"}, nil)
	updateSpec(t, "crashy-2", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Suspend = false })
	ready(t, "crashy-2")
	cm := &corev1.ConfigMap{}
	if !exists(t, member, cm, "default", "crash-c") || !owned(t, cm, "hub/crashy-2") {
		t.Errorf("crash-c: %v", cm.Annotations)
	}
}

// crashAfterRecordingARevision leaves a VidraResource as an operator stopped between
// recording a revision (which names the objects it is about to apply) and writing its
// status would: the revision names objects, created on the member, that the status does
// not.
func crashAfterRecordingARevision(t *testing.T, name, member, object string) {
	t.Helper()
	ctx := context.Background()
	deliver(t, name, vidrav1alpha1.Destination{Cluster: member}, cmManifest(object),
		func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Suspend = true })
	vr := condition(t, name, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended)
	h := &history.History{Client: fleet.Hub.Client, Reader: fleet.Hub.Client, Namespace: testoperator.Namespace}
	manifest := cmManifest(object)
	_, err := h.Record(ctx, vr, history.Entry{
		Body: history.Body{Manifest: manifest}, Digest: content.Digest([]byte(manifest)), Source: "user", Limit: 10,
		Inventory: []vidrav1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: object}},
	})
	if err != nil {
		t.Fatal(err)
	}
	createUnjoined(t, member, object)
}

// TestCrashAfterRecordingARevisionLeavesNoOrphan: an object a revision recorded and the
// apply created, with no status written, is pruned when the bundle no longer has it.
func TestCrashAfterRecordingARevisionLeavesNoOrphan(t *testing.T) {
	member := fleet.Members[0]
	crashAfterRecordingARevision(t, "crashy-3", member.Name, "crash-d")
	updateSpec(t, "crashy-3", func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.Suspend = false
		vr.Spec.Manifest = cmManifest("crash-e")
	})
	vr := ready(t, "crashy-3")
	gone(t, member, &corev1.ConfigMap{}, "default", "crash-d")
	if len(vr.Status.ManagedResources) != 1 || vr.Status.ManagedResources[0].Name != "crash-e" {
		t.Errorf("managedResources = %+v", vr.Status.ManagedResources)
	}
	if vr.Status.Revision != 2 {
		t.Errorf("status.revision %d, want 2 (the crashed revision was 1)", vr.Status.Revision)
	}
}

// TestDeletingAfterACrashReleasesWhatTheRevisionRecorded: deleting a VidraResource whose
// status never named an object its revision recorded releases that object too.
func TestDeletingAfterACrashReleasesWhatTheRevisionRecorded(t *testing.T) {
	member := fleet.Members[0]
	crashAfterRecordingARevision(t, "crashy-4", member.Name, "crash-f")
	remove(t, "crashy-4")
	gone(t, member, &corev1.ConfigMap{}, "default", "crash-f")
}

func memberNamed(name string) *testfleet.Cluster {
	for _, m := range fleet.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// TestAPendingRevisionIsKeptUntilSomethingElseNamesItsObjects: a revision recorded by a
// reconcile that never wrote its status is the only record of its objects; the history
// limit deletes it only once a newer revision, or the status, names them.
func TestAPendingRevisionIsKeptUntilSomethingElseNamesItsObjects(t *testing.T) {
	ctx := context.Background()
	deliver(t, "pending-history", vidrav1alpha1.Destination{Cluster: fleet.Members[0].Name}, cmManifest("pending-x"),
		func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Suspend = true })
	vr := condition(t, "pending-history", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended)
	h := &history.History{Client: fleet.Hub.Client, Reader: fleet.Hub.Client, Namespace: testoperator.Namespace}
	ref := func(name string) vidrav1alpha1.ManagedResource {
		return vidrav1alpha1.ManagedResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: name}
	}
	record := func(manifest string, limit int, inventory, owned []vidrav1alpha1.ManagedResource) history.Recorded {
		t.Helper()
		rec, err := h.Record(ctx, vr, history.Entry{
			Body: history.Body{Manifest: manifest}, Digest: content.Digest([]byte(manifest)), Source: "user",
			Limit: limit, Inventory: inventory, Owned: owned,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	names := func(ms []vidrav1alpha1.ManagedResource) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		slices.Sort(out)
		return out
	}
	// Revision 1 names x; the status never said so (revision 0 delivered).
	record(cmManifest("pending-x"), 1, []vidrav1alpha1.ManagedResource{ref("pending-x")}, nil)
	// With a limit of 0 and a status that does not name x, revision 1 stays.
	if rec := record(cmManifest("pending-y"), 0, []vidrav1alpha1.ManagedResource{ref("pending-y")}, nil); !slices.Equal(names(rec.Pending), []string{"pending-x"}) {
		t.Fatalf("pending %v, want pending-x", names(rec.Pending))
	}
	if pending, err := h.Pending(ctx, vr); err != nil || !slices.Equal(names(pending), []string{"pending-x"}) {
		t.Fatalf("after a limit of 0 the pending revision is gone: %v, %v", names(pending), err)
	}
	// Revision 2 of a limit of 1 names x too, so revision 1 may go.
	rec := record(cmManifest("pending-y"), 1, []vidrav1alpha1.ManagedResource{ref("pending-y")}, nil)
	if rec.Number != 2 || !slices.Equal(names(rec.Inventory), []string{"pending-x", "pending-y"}) {
		t.Fatalf("revision %d names %v, want 2 naming pending-x and pending-y", rec.Number, names(rec.Inventory))
	}
	revisions, err := h.List(ctx, vr)
	if err != nil || len(revisions) != 1 || revisions[0].Number != 2 {
		t.Fatalf("revisions %+v (%v), want revision 2 alone", revisions, err)
	}
	// Once the status names x, a limit of 0 deletes what was pending.
	record(cmManifest("pending-y"), 0, nil, []vidrav1alpha1.ManagedResource{ref("pending-x"), ref("pending-y")})
	if revisions, err := h.List(ctx, vr); err != nil || len(revisions) != 0 {
		t.Fatalf("revisions %+v (%v), want none", revisions, err)
	}
}
