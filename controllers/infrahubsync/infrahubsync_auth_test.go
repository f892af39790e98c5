package infrahubsync_test

import (
	"context"
	"net/url"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/infrahubsync"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

// With a username and password the sync logs in once, keeps its token between syncs,
// and when Infrahub says it expired refreshes it and carries on.
func TestAnExpiredTokenIsRefreshedMidRun(t *testing.T) {
	s := newInfrahub(t, "login", infrahubtest.Options{Users: map[string]string{"vidra": "pa55word"}})
	const ns = "ihs-login"
	putSites(s, "main", ns, "v1", "paris")
	createSecret(t, "login-user", nil, map[string][]byte{"username": []byte("vidra"), "password": []byte("pa55word")}, s.URL())
	newSync(t, "login", "login", s, withCluster(fleet.Members[0].Name), func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Spec.Source.CredentialsSecretRef.Name = "login-user"
	})
	allReady(t, "login", 1)
	requestSync(t, "login")
	waitGraphQLRequests(t, s, 2)
	syncReady(t, "login")
	if s.Logins() != 1 {
		t.Errorf("%d logins for 2 syncs, want 1", s.Logins())
	}

	s.ExpireAccessTokens()
	putSites(s, "main", ns, "v2", "paris")
	requestSync(t, "login")
	waitValue(t, fleet.Members[0], ns, "paris", "v2")
	syncReady(t, "login")
	if s.Refreshes() != 1 || s.Logins() != 1 {
		t.Errorf("after the token expired: %d refreshes, %d logins; want 1 and 1", s.Refreshes(), s.Logins())
	}
}

// Without credentialsSecretRef, the original Vidra's convention applies: the Secret
// labeled infrahub-api-url=<host> in the operator's namespace — and only there.
func TestCredentialsFromTheLabeledSecretInTheOperatorsNamespaceOnly(t *testing.T) {
	s := newInfrahub(t, "labeled", infrahubtest.Options{Users: map[string]string{"vidra": "pa55word"}})
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	putSites(s, "main", "ihs-labeled", "v1", "paris")
	noCredentialsRef := func(ihs *vidrav1alpha1.InfrahubSync) { ihs.Spec.Source.CredentialsSecretRef = nil }

	// None in the operator's namespace (one elsewhere is ignored): anonymous, refused.
	other := createSecretIn(t, "default", "labeled-elsewhere", map[string]string{vidrav1alpha1.InfrahubURLLabel: u.Hostname()},
		map[string][]byte{"username": []byte("vidra"), "password": []byte("pa55word")})
	newSync(t, "labeled", "labeled", s, withCluster(fleet.Members[0].Name), noCredentialsRef)
	ihs := syncCondition(t, "labeled", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonAuthenticationFailed)
	if !containsAll(readyMessage(ihs), "Authentication is required") {
		t.Errorf("Ready message = %q", readyMessage(ihs))
	}
	if s.Logins() != 0 {
		t.Errorf("the labeled Secret in namespace %s was used", other)
	}

	// One in the operator's namespace: used.
	createSecret(t, "labeled-here", map[string]string{vidrav1alpha1.InfrahubURLLabel: u.Hostname()},
		map[string][]byte{"username": []byte("vidra"), "password": []byte("pa55word")}, s.URL())
	requestSync(t, "labeled")
	allReady(t, "labeled", 1)
	syncReady(t, "labeled")
	if s.Logins() != 1 {
		t.Errorf("%d logins, want 1 with the labeled Secret", s.Logins())
	}
}

// An operator given no right on Secrets (the chart's standalone mode) has no labeled
// credentials to find: it reads Infrahub anonymously instead of failing.
func TestWithoutRightsOnSecretsTheLabeledSecretIsNotLookedFor(t *testing.T) {
	kubeconfig, err := fleet.Hub.AddUser("vidra-no-secrets")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sync := func(src vidrav1alpha1.InfrahubSyncSource) *vidrav1alpha1.InfrahubSync {
		src.InfrahubAPIURL = "https://infrahub.example.com"
		return &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: requestedBy(adminUser, adminGroup)}, Spec: vidrav1alpha1.InfrahubSyncSpec{Source: src}}
	}
	creds, err := infrahubsync.CredentialsFor(context.Background(), c, namespace, sync(vidrav1alpha1.InfrahubSyncSource{}), "infrahub.example.com")
	if err != nil || creds != (infrahub.Credentials{}) {
		t.Fatalf("credentials without rights on Secrets = %v, %v; want anonymous", creds, err)
	}
	// A reference it was told to read is still an error: the sync says what is missing.
	ref := vidrav1alpha1.InfrahubSyncSource{CredentialsSecretRef: &vidrav1alpha1.SecretReference{Namespace: namespace, Name: "x"}}
	if _, err := infrahubsync.CredentialsFor(context.Background(), c, namespace, sync(ref), "infrahub.example.com"); err == nil {
		t.Fatal("a credentialsSecretRef that cannot be read was taken as anonymous")
	}
}
