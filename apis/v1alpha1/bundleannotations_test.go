package v1alpha1

import (
	"maps"
	"testing"
)

func TestBundleAnnotationsAreReadUnderTheirEarlierKeys(t *testing.T) {
	earlier := map[string]string{legacyArtifactIDAnnotation: "a", legacyArtifactTargetAnnotation: "main@sha1:1", "other": "x"}
	if got := BundleAnnotation(earlier, BundleIDAnnotation); got != "a" {
		t.Errorf("id %q, want a", got)
	}
	now := map[string]string{BundleIDAnnotation: "b", legacyArtifactIDAnnotation: "a"}
	if got := BundleAnnotation(now, BundleIDAnnotation); got != "b" {
		t.Errorf("id %q, want the one under its own key, b", got)
	}

	for _, tc := range []struct {
		sourceRevision bool
		want           map[string]string
	}{
		{true, map[string]string{BundleIDAnnotation: "a", BundleRevisionAnnotation: "main@sha1:1", "other": "x"}},
		{false, map[string]string{BundleIDAnnotation: "a", BundleTargetAnnotation: "main@sha1:1", "other": "x"}},
	} {
		if got := UpgradedBundleAnnotations(earlier, tc.sourceRevision); !maps.Equal(got, tc.want) {
			t.Errorf("source revision %v: upgraded %v, want %v", tc.sourceRevision, got, tc.want)
		}
	}
	if _, ok := earlier[BundleIDAnnotation]; ok {
		t.Error("the annotations upgraded were changed in place")
	}
	if got := UpgradedBundleAnnotations(now, false); !maps.Equal(got, map[string]string{BundleIDAnnotation: "b"}) {
		t.Errorf("upgraded %v: the value under its own key wins", got)
	}
	if got := UpgradedBundleAnnotations(map[string]string{BundleIDAnnotation: "b"}, false); got != nil {
		t.Errorf("nothing to move, yet upgraded %v", got)
	}
}
