package infrahubsync_test

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A credential goes only to the URLs its Secret lists, and only for a sync whose author
// may use it: otherwise the sync stalls, naming the Secret and what is missing, and the
// server never hears from it.
func TestACredentialGoesOnlyWhereItsSecretAllowsAndForWhoMayUseIt(t *testing.T) {
	s := newInfrahub(t, "creds", infrahubtest.Options{})
	putSites(s, "main", "ihs-creds", "v1", "paris")
	token := map[string][]byte{"apiToken": []byte(apiToken)}
	createSecret(t, "creds-elsewhere", nil, token, "https://infrahub.example.com", s.URL()+"/team-a")
	createSecret(t, "creds-nowhere", nil, token)
	for _, tt := range []struct {
		name   string
		mutate func(*vidrav1alpha1.InfrahubSync)
		want   []string
	}{
		{"creds-other-url", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.CredentialsSecretRef.Name = "creds-elsewhere"
		}, []string{"Secret " + namespace + "/creds-elsewhere may be sent only to https://infrahub.example.com, " + s.URL() + "/team-a", "not to " + s.URL()}},
		{"creds-no-url", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Spec.Source.CredentialsSecretRef.Name = "creds-nowhere"
		}, []string{"Secret " + namespace + "/creds-nowhere lists no URL", vidrav1alpha1.AllowedURLsAnnotation}},
		{"creds-no-right", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Annotations = requestedBy("team-b", "team-b-devs")
		}, []string{"team-b, who last changed InfrahubSync creds-no-right, may not use Secret " + namespace + "/creds-token",
			"the verb use on secrets named creds-token in namespace " + namespace}},
		{"creds-no-requester", func(ihs *vidrav1alpha1.InfrahubSync) {
			ihs.Annotations = nil
		}, []string{"InfrahubSync creds-no-requester records no requester", vidrav1alpha1.RequestedByAnnotation}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			newSync(t, tt.name, "creds", s, withCluster(fleet.Members[1].Name), tt.mutate)
			ihs := syncCondition(t, tt.name, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonCredentialsRefused)
			if msg := readyMessage(ihs); !containsAll(msg, tt.want...) || containsAll(msg, apiToken) {
				t.Errorf("Ready message %q; want %q and no credential", msg, tt.want)
			}
			waitEvent(t, tt.name, vidrav1alpha1.ReasonCredentialsRefused, tt.want[0])
			if n := len(resourcesOf(t, tt.name)); n != 0 {
				t.Errorf("%d VidraResources from a refused credential", n)
			}
		})
	}
	if n := s.GraphQLRequests(); n != 0 {
		t.Errorf("the server heard %d requests from syncs whose credentials were refused", n)
	}

	// Granted use of both its Secrets (a CA Secret follows the same rule), the author's sync
	// reads with them at its next sync.
	grantUse(t, "team-b", "creds-token")
	grantUse(t, "team-b", "creds-ca")
	newSync(t, "creds-granted", "creds", s, withCluster(fleet.Members[1].Name), func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Annotations = requestedBy("team-b", "team-b-devs")
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("creds-granted: %+v", getSync(t, "creds-granted").Status.Conditions)
		}
	})
	allReady(t, "creds-granted", 1)
	syncReady(t, "creds-granted")
}

// grantUse lets the user use one Secret of the operator's namespace, until the test ends.
func grantUse(t *testing.T, user, secret string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "use-" + secret},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{vidrav1alpha1.UseVerb},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "use-" + secret},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := fleet.Hub.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), role) })
	if err := fleet.Hub.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), binding) })
	// The API server's authorizer learns of new RBAC from its informers.
	testfleet.Eventually(t, 10*time.Second, user+" may use Secret "+secret, func() (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Resource: "secrets", Name: secret, Verb: vidrav1alpha1.UseVerb,
			},
		}}
		err := fleet.Hub.Client.Create(ctx, sar)
		return err == nil && sar.Status.Allowed, err
	})
}
