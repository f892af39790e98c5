package history_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

func TestARevisionSaysWhichSyncAndWhichSourceRevisionItCameFrom(t *testing.T) {
	commit := "main@sha1:0123456789abcdef0123456789abcdef01234567"
	bundle := func(id, key, value string) map[string]string {
		return map[string]string{vidrav1alpha1.BundleIDAnnotation: id, key: value, vidrav1alpha1.BundleChecksumAnnotation: "sum"}
	}
	// The keys earlier versions wrote, which VidraResources keep until their sync
	// writes them again.
	legacy := map[string]string{"vidra.infrahub.operators.com/artifact-id": "bundle",
		"vidra.infrahub.operators.com/artifact-target": commit, "vidra.infrahub.operators.com/artifact-checksum": "sum"}
	for _, tc := range []struct {
		labels, annotations map[string]string
		source, rev         string
	}{
		{map[string]string{vidrav1alpha1.InfrahubSyncLabel: "edge"}, bundle("a1", vidrav1alpha1.BundleTargetAnnotation, "paris"), "InfrahubSync edge: artifact a1, checksum sum", ""},
		{map[string]string{vidrav1alpha1.GitSyncLabel: "web"}, bundle("bundle", vidrav1alpha1.BundleRevisionAnnotation, commit), "GitSync web: bundle " + commit + ", checksum sum", commit},
		{map[string]string{vidrav1alpha1.GitSyncLabel: "web"}, legacy, "GitSync web: bundle " + commit + ", checksum sum", commit},
		{map[string]string{vidrav1alpha1.OCISyncLabel: "web"}, bundle("bundle", vidrav1alpha1.BundleRevisionAnnotation, "v1@sha256:abc"), "OCISync web: bundle v1@sha256:abc, checksum sum", "v1@sha256:abc"},
		{nil, nil, "", ""},
	} {
		vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: tc.labels, Annotations: tc.annotations}}
		source := history.SyncSource(vr)
		if source != tc.source {
			t.Errorf("labels %v: source %q, want %q", tc.labels, source, tc.source)
		}
		if got := history.SourceRevision(source); got != tc.rev {
			t.Errorf("source %q: source revision %q, want %q", source, got, tc.rev)
		}
	}
	for _, other := range []string{"user", "rollback to revision 2"} {
		if got := history.SourceRevision(other); got != "" {
			t.Errorf("source %q: source revision %q, want none", other, got)
		}
	}
}
