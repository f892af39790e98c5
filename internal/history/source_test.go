package history_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/history"
)

func TestARevisionSaysWhichSyncAndWhichSourceRevisionItCameFrom(t *testing.T) {
	commit := "main@sha1:0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		labels      map[string]string
		id, target  string
		source, rev string
	}{
		{map[string]string{vidrav1alpha1.InfrahubSyncLabel: "edge"}, "a1", "paris", "InfrahubSync edge: artifact a1, checksum sum", ""},
		{map[string]string{vidrav1alpha1.GitSyncLabel: "web"}, "bundle", commit, "GitSync web: bundle " + commit + ", checksum sum", commit},
		{map[string]string{vidrav1alpha1.OCISyncLabel: "web"}, "bundle", "v1@sha256:abc", "OCISync web: bundle v1@sha256:abc, checksum sum", "v1@sha256:abc"},
		{nil, "", "", "", ""},
	} {
		vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: tc.labels, Annotations: map[string]string{
			vidrav1alpha1.ArtifactIDAnnotation: tc.id, vidrav1alpha1.ArtifactTargetAnnotation: tc.target, vidrav1alpha1.ArtifactChecksumAnnotation: "sum",
		}}}
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
