package infrahubsync_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// An Infrahub branch, where a proposed change lives, is previewed before it merges: its
// artifacts listed and downloaded as the sync would once merged, dry-run on the cluster
// against what the sync delivered, counted per cluster in status.previews, with a
// PreviewReady Event; nothing on the member changes, and a branch the patterns do not
// name is not previewed.
func TestPreviewsShowWhatAnInfrahubBranchWouldDo(t *testing.T) {
	const ns = "ihs-previews"
	s := newInfrahub(t, "previews", infrahubtest.Options{})
	putSites(s, "main", ns, "v1", "paris", "lyon")
	newSync(t, "previews", "previews", s, withCluster(fleet.Members[0].Name), func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Spec.Previews = &vidrav1alpha1.BranchPreviews{Branches: []string{"feature-*"}}
	})
	allReady(t, "previews", 2)
	member := fleet.Members[0].Client
	var before corev1.ConfigMap
	if err := member.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-paris"}, &before); err != nil {
		t.Fatal(err)
	}

	s.CreateBranch("feature-paris")
	putSites(s, "feature-paris", ns, "v2", "paris")
	s.CreateBranch("hotfix")
	putSites(s, "hotfix", ns, "v3", "paris", "lyon")
	requestSync(t, "previews")

	var p vidrav1alpha1.RefPreview
	testfleet.Eventually(t, 60*time.Second, "the preview of feature-paris", func() (bool, error) {
		ihs := getSync(t, "previews")
		for _, rp := range ihs.Status.Previews {
			if rp.Ref == "feature-paris" && rp.ComputedAt != nil {
				p = rp
			}
		}
		return p.Ref != "" && len(ihs.Status.Previews) == 1, nil
	})
	if p.Clusters != 1 || p.Changed != 1 || p.Updated != 1 || p.Added != 0 || p.Removed != 0 || p.Refused != 0 || p.Digest == "" {
		t.Errorf("preview of feature-paris = %+v, want 1 cluster changing, ~1", p)
	}
	waitEvent(t, "previews", vidrav1alpha1.EventPreviewReady, "feature-paris", "1 of 1 clusters change: +0 ~1 -0")
	if n := testfleet.MetricValue(t, registry, "vidra_previews_total", map[string]string{"kind": "InfrahubSync", "result": "ready"}); n < 1 {
		t.Errorf("vidra_previews_total{kind=InfrahubSync,result=ready} = %v, want the preview counted", n)
	}

	var after corev1.ConfigMap
	if err := member.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-paris"}, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || configMapValue(t, fleet.Members[0], ns, "paris") != "v1" {
		t.Errorf("web-paris changed under a preview: %v (resourceVersion %s, was %s)", after.Data, after.ResourceVersion, before.ResourceVersion)
	}

	// A change on the branch is a new revision, previewed anew.
	putSites(s, "feature-paris", ns, "v2", "lyon")
	requestSync(t, "previews")
	testfleet.Eventually(t, 60*time.Second, "the preview of feature-paris's new revision", func() (bool, error) {
		for _, rp := range getSync(t, "previews").Status.Previews {
			if rp.Ref == "feature-paris" && rp.Revision != p.Revision {
				p = rp
				return true, nil
			}
		}
		return false, nil
	})
	if p.Changed != 1 || p.Updated != 2 {
		t.Errorf("preview of feature-paris's new revision = %+v, want ~2 on 1 cluster", p)
	}
}
