package fanout_test

import (
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// The VidraResources a delivery wrote, as the API server keeps them (its defaults filled
// in), are known as the sync's own: their events do not wake it. One changed by someone
// else in a field the sync writes wakes it; a field the sync leaves alone (an API
// server default its template does not set) does not; a deletion always does, and is
// forgotten.
func TestASyncIsWokenByOthersChangesToItsVidraResourcesNotByItsOwn(t *testing.T) {
	sel := map[string]string{"suite": "written"}
	enroll(t, "written-1", sel)
	enroll(t, "written-2", sel)
	src := newSource(map[string]string{"a": configMap("a", "1")})
	opts := selecting(sel)
	opts.Template = &vidrav1alpha1.VidraResourceTemplate{Prune: ptr.To(false)}
	h := newHarness(t, "written", opts, src)
	written := fanout.NewWritten()
	h.cfg.Written = written
	wakes := written.ByOthers()
	created := func(vr *vidrav1alpha1.VidraResource) bool { return wakes.Create(event.CreateEvent{Object: vr}) }
	updated := func(old, cur *vidrav1alpha1.VidraResource) bool {
		return wakes.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur})
	}

	h.round(src.items("a"))
	first := resourcesOf(t, h.sync)
	if len(first) != 2 || written.Len() != 2 {
		t.Fatalf("%d VidraResources, %d remembered; want 2 of each", len(first), written.Len())
	}
	for i := range first {
		if first[i].Spec.HistoryLimit == nil || first[i].Spec.AdoptExisting == "" {
			t.Fatalf("VidraResource %s: the API server's defaults are not filled in: %+v", first[i].Name, first[i].Spec)
		}
		if created(&first[i]) {
			t.Errorf("VidraResource %s, created as the sync wrote it, wakes the sync", first[i].Name)
		}
	}

	src.set("a", configMap("a", "2"), nil)
	h.round(src.items("a"))
	second := resourcesOf(t, h.sync)
	for i := range second {
		if second[i].Generation != 2 {
			t.Fatalf("VidraResource %s at generation %d after a change of content, want 2", second[i].Name, second[i].Generation)
		}
		if updated(&first[i], &second[i]) {
			t.Errorf("VidraResource %s, updated as the sync wrote it, wakes the sync", second[i].Name)
		}
	}

	vr := &second[0]
	for _, tc := range []struct {
		name   string
		change func(*vidrav1alpha1.VidraResource)
		wakes  bool
	}{
		{"manifest edited", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = configMap("a", "edited") }, true},
		{"prune, which the template sets, flipped", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Prune = ptr.To(true) }, true},
		{"checksum annotation changed", func(vr *vidrav1alpha1.VidraResource) {
			vr.Annotations[vidrav1alpha1.BundleChecksumAnnotation] = "0"
		}, true},
		{"label added", func(vr *vidrav1alpha1.VidraResource) { vr.Labels["team"] = "network" }, true},
		{"history limit, which the template leaves to the default, changed", func(vr *vidrav1alpha1.VidraResource) {
			vr.Spec.HistoryLimit = ptr.To(int32(3))
		}, false},
		{"status changed", func(vr *vidrav1alpha1.VidraResource) { vr.Status.ObservedGeneration = 7 }, false},
	} {
		changed := vr.DeepCopy()
		tc.change(changed)
		if got := updated(vr, changed); got != tc.wakes {
			t.Errorf("%s: wakes the sync %v, want %v", tc.name, got, tc.wakes)
		}
	}

	if !wakes.Delete(event.DeleteEvent{Object: vr}) || written.Len() != 1 {
		t.Errorf("a deletion does not wake the sync, or is not forgotten (%d remembered, want 1)", written.Len())
	}
	if !created(vr) {
		t.Error("a VidraResource made again after its deletion, not by the sync, does not wake it")
	}

	var none *fanout.Written
	if !none.ByOthers().Create(event.CreateEvent{Object: &second[1]}) {
		t.Error("without a memory of writes, a VidraResource created does not wake the sync")
	}
}
