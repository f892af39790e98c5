package infrahubsync_test

import (
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

// Two syncs of the same artifact name on different branches — where Infrahub keeps the
// same artifact IDs — make VidraResources of their own, each with its branch's content.
func TestSyncsOfOneArtifactOnTwoBranchesDoNotCollide(t *testing.T) {
	s := newInfrahub(t, "branches", infrahubtest.Options{})
	putSites(s, "main", "ihs-branch-main", "main", "paris")
	s.CreateBranch("feature")
	putSites(s, "feature", "ihs-branch-feature", "feature", "paris")

	onBranch := func(branch string) func(*vidrav1alpha1.InfrahubSync) {
		return func(ihs *vidrav1alpha1.InfrahubSync) { ihs.Spec.Source.TargetBranch = branch }
	}
	newSync(t, "branch-main", "branches", s, withCluster(fleet.Members[0].Name), onBranch("main"))
	newSync(t, "branch-feature", "branches", s, withCluster(fleet.Members[0].Name), onBranch("feature"))
	onMain, onFeature := allReady(t, "branch-main", 1), allReady(t, "branch-feature", 1)
	if onMain[0].Name == onFeature[0].Name {
		t.Fatalf("both branches named their VidraResource %s", onMain[0].Name)
	}
	if onMain[0].Annotations[vidrav1alpha1.BundleIDAnnotation] != onFeature[0].Annotations[vidrav1alpha1.BundleIDAnnotation] {
		t.Fatal("the test needs one artifact ID on both branches")
	}
	waitValue(t, fleet.Members[0], "ihs-branch-main", "paris", "main")
	waitValue(t, fleet.Members[0], "ihs-branch-feature", "paris", "feature")
}
