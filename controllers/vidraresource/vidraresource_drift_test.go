package vidraresource_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestDriftIsRepairedWithinSeconds: another field manager changes an applied object; the
// destination's watch reports it and the declared value is back long before a resync.
func TestDriftIsRepairedWithinSeconds(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	deliver(t, "steady", vidrav1alpha1.Destination{Cluster: member.Name, ReconcileOnEvents: true}, cmManifest("steady"))
	ready(t, "steady")

	cm := &corev1.ConfigMap{}
	exists(t, member, cm, "default", "steady")
	cm.Data["k"] = "edited by hand"
	start := time.Now()
	if err := member.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	testfleet.Poll(t, 10*time.Millisecond, 10*time.Second, "drift repaired", func() (bool, error) {
		got := &corev1.ConfigMap{}
		return exists(t, member, got, "default", "steady") && got.Data["k"] == "v", nil
	})
	t.Logf("drift repaired in %v", time.Since(start).Round(time.Millisecond))
	// The repair is visible on the member a moment before the reconcile that made it
	// counts it.
	testfleet.Eventually(t, 5*time.Second, "vidra_drift_repaired_total counts the repair", func() (bool, error) {
		return metricValue(t, "vidra_drift_repaired_total", map[string]string{"cluster": member.Name}) >= 1, nil
	})
	if v := metricValue(t, "vidra_managed_objects", map[string]string{"cluster": member.Name}); v < 1 {
		t.Errorf("vidra_managed_objects{cluster=%q} = %v", member.Name, v)
	}
	if v := metricValue(t, "vidra_apply_total", map[string]string{"cluster": member.Name, "result": "Created"}); v < 1 {
		t.Errorf("vidra_apply_total{result=Created} = %v", v)
	}

	// A deleted object comes back too.
	if err := member.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 10*time.Second, "deleted object recreated", func() (bool, error) {
		return exists(t, member, &corev1.ConfigMap{}, "default", "steady"), nil
	})
}

// TestWithoutReconcileOnEventsDriftWaitsForTheResync: reconcileOnEvents false keeps the
// original Vidra's periodic-only behaviour: a change is not answered at once.
func TestWithoutReconcileOnEventsDriftWaitsForTheResync(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	deliver(t, "periodic", vidrav1alpha1.Destination{Cluster: member.Name}, cmManifest("periodic"))
	ready(t, "periodic")
	cm := &corev1.ConfigMap{}
	exists(t, member, cm, "default", "periodic")
	cm.Data["k"] = "edited by hand"
	if err := member.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a watch-driven repair takes tens of milliseconds
	if exists(t, member, cm, "default", "periodic"); cm.Data["k"] != "edited by hand" {
		t.Errorf("k = %q: repaired on an event although reconcileOnEvents is false", cm.Data["k"])
	}
	// A change of the VidraResource itself still reconciles it at once.
	updateSpec(t, "periodic", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = cmManifest("periodic") + "  # touched\n" })
	testfleet.Eventually(t, 10*time.Second, "repaired by the next reconcile", func() (bool, error) {
		got := &corev1.ConfigMap{}
		return exists(t, member, got, "default", "periodic") && got.Data["k"] == "v", nil
	})
}

// TestChangeBeforeADriftWatchListsRequeuesTheOwner: a drift watch starts after the apply
// that first uses its kind; a change made in between shows only in its first list, which
// requeues the changed object's owner and not the owners of objects left as applied.
func TestChangeBeforeADriftWatchListsRequeuesTheOwner(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	// Periodic only: the operator's own watches leave the change alone.
	for _, name := range []string{"listed-changed", "listed-kept"} {
		deliver(t, name, vidrav1alpha1.Destination{Cluster: member.Name}, cmManifest(name))
		ready(t, name)
	}
	cm := &corev1.ConfigMap{}
	exists(t, member, cm, "default", "listed-changed")
	cm.Data["k"] = "edited by hand"
	if err := member.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	cl, err := engaged.GetCluster(ctx, multicluster.ClusterName(member.Name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	requeued := watches.RequeuedOnListing(ctx, multicluster.ClusterName(member.Name), cl, "listed-changed", configMapMetadata().GroupVersionKind())
	if !slices.Contains(requeued, "listed-changed") || slices.Contains(requeued, "listed-kept") {
		t.Errorf("the first list requeued %v, want listed-changed and not listed-kept", requeued)
	}
}

// TestUnchangedReconcileWritesNothing: a reconcile that finds every object as its last
// apply left it (the drift watch says so) applies nothing and writes nothing to the hub:
// the status, health messages and lastSyncTime included, stays as it was.
func TestUnchangedReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	deliver(t, "quiet", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "quiet", ReconcileOnEvents: true}, cmManifest("quiet"))
	vr := ready(t, "quiet")
	if vr.Status.LastSyncTime == nil || len(vr.Status.ManagedResources) == 0 || vr.Status.ManagedResources[0].Status != "Current" {
		t.Fatalf("status after the first apply: %+v", vr.Status)
	}
	// Once the drift watches have seen the objects, a reconcile finds them unchanged.
	time.Sleep(2 * time.Second)
	unchanged := metricValue(t, "vidra_apply_total", map[string]string{"cluster": member.Name, "result": "Unchanged"})
	poked := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: "quiet"}, poked); err != nil {
		t.Fatal(err)
	}
	watches.Requeue("quiet") // as a resync or a watch event would
	testfleet.Eventually(t, 10*time.Second, "a reconcile that found its objects unchanged", func() (bool, error) {
		return metricValue(t, "vidra_apply_total", map[string]string{"cluster": member.Name, "result": "Unchanged"}) >= unchanged+2, nil
	})
	time.Sleep(time.Second) // its status write, if any, lands meanwhile
	after := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: "quiet"}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != poked.ResourceVersion {
		t.Errorf("the VidraResource was written by an unchanged reconcile: status %+v, was %+v", after.Status, poked.Status)
	}
}

// TestDriftWatchesCacheWhoWroteNotEachField: a drift watch holds every object Vidra
// manages of its kind on a member, so of its managed fields it keeps who wrote the object,
// how, and when someone else did (what drift is judged on) and whether Vidra's apply owns
// the owners set, not the fields each manager wrote nor when Vidra wrote them.
func TestDriftWatchesCacheWhoWroteNotEachField(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	deliver(t, "trimmed", vidrav1alpha1.Destination{Cluster: member.Name, ReconcileOnEvents: true}, cmManifest("trimmed"))
	ready(t, "trimmed")
	// Someone else's write, which Vidra's apply leaves (it declares no such field).
	note := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/note":"kept"}}}`))
	if err := member.Client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "trimmed"}}, note, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	cl, err := engaged.GetCluster(ctx, multicluster.ClusterName(member.Name))
	if err != nil {
		t.Fatal(err)
	}
	live := configMapMetadata()
	var cached *metav1.PartialObjectMetadata
	ref := inventory.Ref{GVK: live.GroupVersionKind(), Namespace: "default", Name: "trimmed"}
	testfleet.Eventually(t, 10*time.Second, "the object is in the drift watch at its resourceVersion", func() (bool, error) {
		if err := member.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "trimmed"}, live); err != nil {
			return false, err
		}
		var ok bool
		cached, ok = watches.CachedOn(ctx, multicluster.ClusterName(member.Name), cl, ref)
		return ok && cached.ResourceVersion == live.ResourceVersion, nil
	})
	if cached.UID != live.UID || !ownership.IsManaged(cached) || cached.Annotations[vidrav1alpha1.OwnersAnnotation] != live.Annotations[vidrav1alpha1.OwnersAnnotation] {
		t.Errorf("cached %+v, live %+v", cached.ObjectMeta, live.ObjectMeta)
	}
	if len(cached.ManagedFields) != len(live.ManagedFields) {
		t.Fatalf("cached managers %+v, live %+v", cached.ManagedFields, live.ManagedFields)
	}
	fields, someone := 0, false
	for i, e := range live.ManagedFields {
		got := cached.ManagedFields[i]
		timed := e.Manager == "someone"
		someone = someone || timed
		if got.Manager != e.Manager || got.Operation != e.Operation || (timed && !got.Time.Equal(e.Time)) || (!timed && got.Time != nil) {
			t.Errorf("cached entry %+v, live %+v", got, e)
		}
		if e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.GetRawBytes(), []byte(`"f:data"`)) {
			fields++
		}
		if got.FieldsV1 != nil && bytes.Contains(got.FieldsV1.GetRawBytes(), []byte(`"f:data"`)) {
			t.Errorf("the cache keeps the fields %s wrote: %s", got.Manager, got.FieldsV1.GetRawString())
		}
		if c, l := ownership.AppliesOwners(cached, e.Manager), ownership.AppliesOwners(live, e.Manager); c != l {
			t.Errorf("cached, %s applies the owners set: %v; live: %v", e.Manager, c, l)
		}
	}
	if fields == 0 || !someone {
		t.Fatalf("the live object's managed fields list no data field, or not someone's write: %+v", live.ManagedFields)
	}
}

func configMapMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}
