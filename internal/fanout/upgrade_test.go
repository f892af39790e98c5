package fanout_test

import (
	"context"
	"maps"
	"testing"

	"github.com/vidra-operator/vidra/internal/fanout"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// The keys under which earlier versions wrote a bundle's annotations.
const (
	legacyID       = "vidra.infrahub.operators.com/artifact-id"
	legacyChecksum = "vidra.infrahub.operators.com/artifact-checksum"
	legacyName     = "vidra.infrahub.operators.com/artifact-name"
	legacyTarget   = "vidra.infrahub.operators.com/artifact-target"
)

// VidraResources an earlier version wrote, with its annotation keys and the source's
// revision as the bundle's target (in their annotations and the sync's status), are the
// sync's as before: an unchanged round neither writes nor prunes them, and the next
// change of content writes them with this version's keys alone.
func TestResourcesOfAnEarlierVersionAreKeptWithoutARewrite(t *testing.T) {
	sel := map[string]string{"suite": "upgrade"}
	enroll(t, "upgrade-1", sel)
	enroll(t, "upgrade-2", sel)
	src := newSource(map[string]string{"a": configMap("a", "1")})
	h := newHarness(t, "upgrade", selecting(sel), src)
	at := func(revision string) []fanout.Item {
		items := src.items("a")
		items[0].Revision = revision
		return items
	}
	h.round(at("main@sha1:1"))
	for _, vr := range resourcesOf(t, h.sync) {
		a := vr.Annotations
		legacy := map[string]string{legacyID: a[vidrav1alpha1.BundleIDAnnotation], legacyChecksum: a[vidrav1alpha1.BundleChecksumAnnotation],
			legacyName: a[vidrav1alpha1.BundleNameAnnotation], legacyTarget: a[vidrav1alpha1.BundleRevisionAnnotation]}
		for _, k := range []string{vidrav1alpha1.BundleIDAnnotation, vidrav1alpha1.BundleChecksumAnnotation, vidrav1alpha1.BundleNameAnnotation, vidrav1alpha1.BundleRevisionAnnotation} {
			delete(a, k)
		}
		maps.Copy(a, legacy)
		if err := hub.Client.Update(context.Background(), &vr); err != nil {
			t.Fatal(err)
		}
	}
	for i := range h.sync.Status.Bundles {
		b := &h.sync.Status.Bundles[i]
		b.Target, b.Revision = b.Revision, ""
	}

	before := versions(t, h.sync)
	h.round(at("main@sha1:1"))
	if after := versions(t, h.sync); len(before) != 2 || !maps.Equal(before, after) {
		t.Fatalf("the upgraded operator rewrote or pruned its VidraResources: %v → %v", before, after)
	}
	if b := h.sync.Status.Bundles; len(b) != 1 || b[0].Revision != "main@sha1:1" || b[0].Target != "" {
		t.Errorf("status %+v, want the revision as revision and no target", b)
	}

	src.set("a", configMap("a", "2"), nil)
	h.round(at("main@sha1:2"))
	vrs := resourcesOf(t, h.sync)
	if len(vrs) != 2 {
		t.Fatalf("%d VidraResources after the change, want 2", len(vrs))
	}
	for _, vr := range vrs {
		a := vr.Annotations
		for _, k := range []string{legacyID, legacyChecksum, legacyName, legacyTarget, vidrav1alpha1.BundleTargetAnnotation} {
			if v, ok := a[k]; ok {
				t.Errorf("VidraResource %s keeps %s=%q", vr.Name, k, v)
			}
		}
		if a[vidrav1alpha1.BundleIDAnnotation] != "a" || a[vidrav1alpha1.BundleRevisionAnnotation] != "main@sha1:2" || a[vidrav1alpha1.BundleNameAnnotation] != "a" ||
			a[vidrav1alpha1.BundleChecksumAnnotation] != src.items("a")[0].Checksum {
			t.Errorf("VidraResource %s: annotations %v", vr.Name, a)
		}
	}
}
