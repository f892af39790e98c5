package infrahubsync_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// retrying syncs every two seconds: an Infrahub over the bounds is read again and again
// while the other sync delivers.
func retrying(ihs *vidrav1alpha1.InfrahubSync) {
	ihs.Spec.Interval = &metav1.Duration{Duration: 2 * time.Second}
}

// neighbour starts a sync of one artifact on another Infrahub, delivered to member, and
// returns a function that changes its value and waits until the member has it: the proof
// that a sync over its bounds holds no other sync up.
func neighbour(t *testing.T, name string, member *testfleet.Cluster) func(value string) {
	t.Helper()
	s := newInfrahub(t, name, infrahubtest.Options{})
	ns := "ihs-" + name
	putSites(s, "main", ns, "v1", "oslo")
	newSync(t, name, name, s, withCluster(member.Name))
	allReady(t, name, 1)
	waitValue(t, member, ns, "oslo", "v1")
	return func(value string) {
		t.Helper()
		putSites(s, "main", ns, value, "oslo")
		requestSync(t, name)
		waitValue(t, member, ns, "oslo", value)
		syncReady(t, name)
	}
}

// stalledOverLimit waits until the sync is Stalled and not Ready for LimitExceeded, and
// checks that its message, lastError and a Warning Event say every part.
func stalledOverLimit(t *testing.T, name string, parts ...string) *vidrav1alpha1.InfrahubSync {
	t.Helper()
	syncCondition(t, name, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonLimitExceeded)
	ihs := syncCondition(t, name, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonLimitExceeded)
	if !containsAll(readyMessage(ihs), parts...) || !containsAll(ihs.Status.LastError, parts...) || ihs.Status.SyncState != vidrav1alpha1.StateFailed {
		t.Errorf("Ready message %q, lastError %q, syncState %s; want %q", readyMessage(ihs), ihs.Status.LastError, ihs.Status.SyncState, parts)
	}
	waitEvent(t, name, vidrav1alpha1.ReasonLimitExceeded, parts...)
	return ihs
}

// An Infrahub that lists more artifacts than the operator lets one sync list stalls that
// sync, saying how many it lists, the bound and the flag that raises it. Nothing it
// delivered is removed — not even an artifact the oversized listing no longer holds, as
// a listing not read to its end says nothing of what is gone — and another sync of the
// same operator keeps delivering meanwhile.
func TestAListingOverTheArtifactsBoundStallsOnlyItsSync(t *testing.T) {
	member := fleet.Members[0]
	deliverNeighbour := neighbour(t, "bounded-neighbour", member)
	s := newInfrahub(t, "many", infrahubtest.Options{})
	const ns = "ihs-many"
	putSites(s, "main", ns, "v1", "paris", "lyon")
	newSync(t, "many", "many", s, withCluster(member.Name), retrying)
	allReady(t, "many", 2)

	// Infrahub now lists paris's and 46 more artifacts, lyon's no longer among them.
	s.Delete("main", "web-lyon")
	for i := range maxArtifacts + 6 {
		putSites(s, "main", ns, "v2", fmt.Sprintf("site-%02d", i))
	}
	requestSync(t, "many")
	ihs := stalledOverLimit(t, "many", fmt.Sprintf("holds %d artifacts", maxArtifacts+7), fmt.Sprintf("over the %d one sync may list", maxArtifacts),
		"what was delivered before stays as it is", "--infrahub-sync-max-artifacts", "infrahub.syncMaxArtifacts")
	if len(ihs.Status.Artifacts) != 2 {
		t.Errorf("a listing over the bound changed the recorded artifacts: %+v", ihs.Status.Artifacts)
	}

	// Stalled and read again every two seconds, it removes nothing and holds no one up.
	deliverNeighbour("v2")
	deliverNeighbour("v3")
	if n := len(resourcesOf(t, "many")); n != 2 {
		t.Errorf("%d VidraResources after listings over the bound, want the 2 delivered before", n)
	}
	if configMapValue(t, member, ns, "paris") != "v1" || configMapValue(t, member, ns, "lyon") != "v1" {
		t.Error("a listing over the bound changed what was delivered")
	}

	// Back under the bound, the sync delivers again, and only now is lyon's removed.
	for i := range maxArtifacts + 6 {
		s.Delete("main", fmt.Sprintf("web-site-%02d", i))
	}
	putSites(s, "main", ns, "v2", "paris")
	syncReady(t, "many")
	waitValue(t, member, ns, "paris", "v2")
	waitValue(t, member, ns, "lyon", "")
}

// An artifact larger than what one sync may download stalls its sync, saying which
// artifact, the bound and the flag that raises it; its VidraResource keeps the content
// it had, and another sync of the same operator keeps delivering meanwhile.
func TestAnArtifactOverTheSyncsBytesStallsOnlyItsSync(t *testing.T) {
	member := fleet.Members[1]
	deliverNeighbour := neighbour(t, "sized-neighbour", member)
	s := newInfrahub(t, "huge", infrahubtest.Options{})
	const ns = "ihs-huge"
	putSites(s, "main", ns, "v1", "paris", "lyon")
	newSync(t, "huge", "huge", s, withCluster(member.Name), retrying)
	allReady(t, "huge", 2)
	delivered := artifactChecksum(getSync(t, "huge"), "web-lyon")

	// lyon's artifact grows past the bound: a manifest with 9 MiB of data.
	s.Put("main", infrahubtest.Artifact{
		ID: "web-lyon", Name: artifactName, TargetLabel: "lyon",
		Content: artifact(ns, "lyon", "v2") + "  padding: " + strings.Repeat("x", maxBytes+(1<<20)) + "\n",
	})
	requestSync(t, "huge")
	ihs := stalledOverLimit(t, "huge", "artifact web-lyon", fmt.Sprintf("past the %d MiB one sync may download", maxBytes>>20),
		"keep what they delivered", "--infrahub-sync-max-bytes", "infrahub.syncMaxBytes")
	if got := artifactChecksum(ihs, "web-lyon"); got != delivered || got == "" {
		t.Errorf("web-lyon records checksum %q, want %q, the one delivered", got, delivered)
	}

	deliverNeighbour("v2")
	deliverNeighbour("v3")
	if n := len(resourcesOf(t, "huge")); n != 2 || configMapValue(t, member, ns, "lyon") != "v1" || configMapValue(t, member, ns, "paris") != "v1" {
		t.Errorf("an artifact over the bound changed what was delivered (%d VidraResources)", n)
	}

	// Back within the bound, it is delivered.
	putSites(s, "main", ns, "v3", "lyon")
	syncReady(t, "huge")
	waitValue(t, member, ns, "lyon", "v3")
}

// artifactChecksum is the delivered checksum the sync records of an artifact.
func artifactChecksum(ihs *vidrav1alpha1.InfrahubSync, id string) string {
	for _, a := range ihs.Status.Artifacts {
		if a.ID == id {
			return a.Checksum
		}
	}
	return ""
}

// An Infrahub listing artifacts the sync's status could not record (their targets'
// display labels are 40 KiB each here: what Infrahub lists is untrusted) stalls the sync,
// saying so, before anything is delivered or removed. Once they fit, it delivers again.
func TestArtifactsTheStatusCannotRecordStallTheSync(t *testing.T) {
	member := fleet.Members[0]
	s := newInfrahub(t, "wordy", infrahubtest.Options{})
	const ns = "ihs-wordy"
	putSites(s, "main", ns, "v1", "paris", "lyon")
	newSync(t, "wordy", "wordy", s, withCluster(member.Name), retrying)
	allReady(t, "wordy", 2)

	// Infrahub now lists paris's and 34 artifacts of wordy targets, lyon's no longer.
	s.Delete("main", "web-lyon")
	label := strings.Repeat("x", 40<<10)
	for i := range 34 {
		site := fmt.Sprintf("wordy-%02d", i)
		s.Put("main", infrahubtest.Artifact{
			ID: artifactName + "-" + site, Name: artifactName, Content: artifact(ns, site, "v2"),
			TargetID: "node-" + site, TargetLabel: label + site, TargetKind: "InfraSite", DefinitionID: "def-web", DefinitionName: "web-definition",
		})
	}
	requestSync(t, "wordy")
	ihs := stalledOverLimit(t, "wordy", "the status of 35 artifacts delivered as 35 VidraResources", "nothing was delivered or removed")
	if len(ihs.Status.Artifacts) != 2 {
		t.Errorf("the recorded artifacts changed: %d, want the 2 delivered before", len(ihs.Status.Artifacts))
	}
	if n := len(resourcesOf(t, "wordy")); n != 2 {
		t.Errorf("%d VidraResources, want the 2 delivered before", n)
	}
	if configMapValue(t, member, ns, "paris") != "v1" || configMapValue(t, member, ns, "lyon") != "v1" {
		t.Error("a listing the status could not record changed what was delivered")
	}

	// Fitting again, the sync delivers, and only now is lyon's removed.
	for i := range 34 {
		s.Delete("main", fmt.Sprintf("%s-wordy-%02d", artifactName, i))
	}
	putSites(s, "main", ns, "v2", "paris")
	syncReady(t, "wordy")
	waitValue(t, member, ns, "paris", "v2")
	waitValue(t, member, ns, "lyon", "")
}
