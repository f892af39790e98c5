package infrahubsync_test

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

// A listing that fails — GraphQL errors in a 200, a server error, a timeout, an answer
// that is not JSON — marks the sync Failed with the cause and changes nothing delivered.
func TestAFailedListingChangesNothing(t *testing.T) {
	member := fleet.Members[1]
	s := newInfrahub(t, "failing", infrahubtest.Options{})
	const ns = "ihs-failing"
	putSites(s, "main", ns, "v1", "paris", "lyon")
	newSync(t, "failing", "failing", s, withCluster(member.Name))
	allReady(t, "failing", 2)

	for _, tt := range []struct {
		name  string
		fault infrahubtest.Fault
		want  []string
	}{
		{"GraphQL errors", infrahubtest.Fault{Path: "/graphql", GraphQLErrors: []string{"Cannot query field 'CoreArtifact' on type 'Query'."}}, []string{"GraphQL errors", "Cannot query field"}},
		{"server error", infrahubtest.Fault{Path: "/graphql", Status: http.StatusInternalServerError, Message: "database unavailable"}, []string{"HTTP 500", "database unavailable"}},
		{"timeout", infrahubtest.Fault{Path: "/graphql", Delay: 10 * time.Second}, []string{"list artifacts", "Timeout"}},
		{"not JSON", infrahubtest.Fault{Path: "/graphql", Body: "<html>bad gateway</html>"}, []string{"not JSON"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s.SetFault(tt.fault)
			requestSync(t, "failing")
			ihs := syncCondition(t, "failing", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonListFailed)
			if !containsAll(readyMessage(ihs), tt.want...) || ihs.Status.SyncState != vidrav1alpha1.StateFailed || !containsAll(ihs.Status.LastError, tt.want...) {
				t.Errorf("Ready message %q, syncState %s, lastError %q; want %q", readyMessage(ihs), ihs.Status.SyncState, ihs.Status.LastError, tt.want)
			}
			if len(ihs.Status.Artifacts) != 2 {
				t.Errorf("a failed listing changed the recorded artifacts: %+v", ihs.Status.Artifacts)
			}
			if n := len(resourcesOf(t, "failing")); n != 2 {
				t.Errorf("%d VidraResources after a failed listing, want the 2 from before", n)
			}
			waitValue(t, member, ns, "paris", "v1")
			waitValue(t, member, ns, "lyon", "v1")

			s.SetFault(infrahubtest.Fault{})
			requestSync(t, "failing")
			syncReady(t, "failing")
		})
	}
}

// Content that does not match its checksum is refused: the sync says so, the artifact's
// VidraResource keeps the content it had, and the next correct content goes through.
func TestContentThatDoesNotMatchItsChecksumIsRefused(t *testing.T) {
	member := fleet.Members[1]
	s := newInfrahub(t, "mismatch", infrahubtest.Options{})
	const ns = "ihs-mismatch"
	putSites(s, "main", ns, "v1", "paris")
	newSync(t, "mismatch", "mismatch", s, withCluster(member.Name))
	allReady(t, "mismatch", 1)

	s.Put("main", infrahubtest.Artifact{ID: "web-paris", Name: "web", Content: artifact(ns, "paris", "tampered"), Checksum: "0123456789abcdef0123456789abcdef", TargetLabel: "paris"})
	requestSync(t, "mismatch")
	ihs := syncCondition(t, "mismatch", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBundleFailed)
	if !containsAll(readyMessage(ihs), "web-paris", "content refused", "Infrahub reports 0123456789abcdef0123456789abcdef") {
		t.Errorf("Ready message = %q", readyMessage(ihs))
	}
	if a := ihs.Status.Artifacts; len(a) != 1 || a[0].Checksum == "0123456789abcdef0123456789abcdef" || a[0].Message == "" {
		t.Errorf("artifact status = %+v, want the delivered checksum kept and a message", a)
	}
	waitEvent(t, "mismatch", vidrav1alpha1.ReasonBundleFailed, "content refused")
	if configMapValue(t, member, ns, "paris") != "v1" || len(resourcesOf(t, "mismatch")) != 1 {
		t.Error("refused content changed what was delivered")
	}

	putSites(s, "main", ns, "v2", "paris")
	requestSync(t, "mismatch")
	waitValue(t, member, ns, "paris", "v2")
	syncReady(t, "mismatch")
}

// A listing with no artifact at all removes nothing — a typo in artefactName must not
// wipe a fleet — unless allowEmpty says an empty listing means it.
func TestAnEmptyListingRemovesNothingUnlessAllowed(t *testing.T) {
	member := fleet.Members[1]
	s := newInfrahub(t, "emptied", infrahubtest.Options{})
	const ns = "ihs-emptied"
	putSites(s, "main", ns, "v1", "paris", "lyon")
	newSync(t, "emptied", "emptied", s, withCluster(member.Name))
	allReady(t, "emptied", 2)

	s.Delete("main", "web-paris")
	s.Delete("main", "web-lyon")
	requestSync(t, "emptied")
	ihs := syncCondition(t, "emptied", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonNoArtifacts)
	if ihs.Status.SyncState != vidrav1alpha1.StateStale || !containsAll(readyMessage(ihs), `no artifact named "web"`, "2 VidraResources made before are kept", "allowEmpty") {
		t.Errorf("syncState %s, Ready message %q", ihs.Status.SyncState, readyMessage(ihs))
	}
	if len(resourcesOf(t, "emptied")) != 2 || configMapValue(t, member, ns, "paris") != "v1" {
		t.Fatal("an empty listing removed what was delivered")
	}

	updateSync(t, "emptied", func(ihs *vidrav1alpha1.InfrahubSync) { ihs.Spec.AllowEmpty = true })
	allReady(t, "emptied", 0)
	waitValue(t, member, ns, "paris", "")
	syncReady(t, "emptied")
}

// Only Ready artifacts are delivered; the others are reported, and what they delivered
// before stays.
func TestArtifactsThatAreNotReadyAreReportedAndKept(t *testing.T) {
	member := fleet.Members[1]
	s := newInfrahub(t, "unready", infrahubtest.Options{})
	const ns = "ihs-unready"
	putSites(s, "main", ns, "v1", "paris", "lyon", "nice")
	newSync(t, "unready", "unready", s, withCluster(member.Name))
	allReady(t, "unready", 3)
	// Ready in effect first: else the pass below may find it still Progressing there.
	syncReady(t, "unready")

	s.Put("main", infrahubtest.Artifact{ID: "web-lyon", Name: "web", Status: "Processing", Content: artifact(ns, "lyon", "v2"), TargetLabel: "lyon"})
	requestSync(t, "unready")
	ihs := syncCondition(t, "unready", vidrav1alpha1.ConditionReconciling, metav1.ConditionTrue, vidrav1alpha1.ReasonProgressing)
	if !containsAll(readyMessage(ihs), "waiting for Infrahub", "web-lyon", "Processing") {
		t.Errorf("Ready message = %q", readyMessage(ihs))
	}

	s.Put("main", infrahubtest.Artifact{ID: "web-nice", Name: "web", Status: "Error", Content: "", TargetLabel: "nice"})
	requestSync(t, "unready")
	ihs = syncCondition(t, "unready", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBundleFailed)
	if !containsAll(readyMessage(ihs), "web-nice", "status Error") {
		t.Errorf("Ready message = %q", readyMessage(ihs))
	}
	if len(resourcesOf(t, "unready")) != 3 || configMapValue(t, member, ns, "lyon") != "v1" || configMapValue(t, member, ns, "nice") != "v1" {
		t.Error("artifacts that are not Ready lost or changed what they delivered")
	}
}

// A source that cannot be used as written stalls the sync with a message naming what
// to fix; nothing is delivered and no credential shows.
func TestUnusableSourcesStallWithAClearMessage(t *testing.T) {
	s := newInfrahub(t, "unusable", infrahubtest.Options{})
	putSites(s, "main", "ihs-unusable", "v1", "paris")
	createSecret(t, "unusable-empty", nil, map[string][]byte{"user": []byte("x")}, s.URL())
	createSecret(t, "unusable-wrong", nil, map[string][]byte{"apiToken": []byte("wrong-token")}, s.URL())
	for _, tt := range []struct {
		name   string
		mutate func(*vidrav1alpha1.InfrahubSync)
		reason string
		want   []string
	}{
		{"unusable-http", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.InfrahubAPIURL = "http://infrahub.example.com"
		}, vidrav1alpha1.ReasonSourceInvalid, []string{"plain http", "insecureAllowHTTP"}},
		{"unusable-elsewhere", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.CredentialsSecretRef.Namespace = "default"
		}, vidrav1alpha1.ReasonSourceInvalid, []string{"credentialsSecretRef default/unusable-token", "only from the operator's namespace " + namespace}},
		{"unusable-missing", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.CredentialsSecretRef.Name = "nope"
		}, vidrav1alpha1.ReasonSourceInvalid, []string{"Secret " + namespace + "/nope not found"}},
		{"unusable-keys", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.CredentialsSecretRef.Name = "unusable-empty"
		}, vidrav1alpha1.ReasonSourceInvalid, []string{"neither apiToken nor both username and password"}},
		{"unusable-ca", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.CASecretRef = nil
		}, vidrav1alpha1.ReasonListFailed, []string{"certificate"}},
		{"unusable-token", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.CredentialsSecretRef.Name = "unusable-wrong"
		}, vidrav1alpha1.ReasonAuthenticationFailed, []string{"HTTP 401", "Invalid token"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			newSync(t, tt.name, "unusable", s, withCluster(fleet.Members[1].Name), tt.mutate)
			ihs := syncCondition(t, tt.name, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, tt.reason)
			msg := readyMessage(ihs)
			if !containsAll(msg, tt.want...) || ihs.Status.SyncState != vidrav1alpha1.StateFailed {
				t.Errorf("Ready message %q, syncState %s; want %q", msg, ihs.Status.SyncState, tt.want)
			}
			if containsAll(msg, "wrong-token") || containsAll(msg, apiToken) {
				t.Errorf("message shows a credential: %q", msg)
			}
			if n := len(resourcesOf(t, tt.name)); n != 0 {
				t.Errorf("%d VidraResources from an unusable source", n)
			}
			t.Logf("%s: %s", tt.reason, msg)
		})
	}
}
