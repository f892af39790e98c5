package sourcesync_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// Each bad input is reported on the sync — Ready False with a reason and a message that
// names the cause, Stalled where only a change of the sync can help, a Warning Event — and
// what was delivered before stays delivered: a failed fetch never prunes.
func TestBadInputIsReportedAndNothingDeliveredIsLost(t *testing.T) {
	const ns = "gs-bad"
	createNamespace(t, ns)
	member := fleet.Members[0]
	srv := gitserver.New(t)
	repo := srv.Repo(t, "bad")
	good := repo.Commit(t, "main", map[string]string{
		"app/web.yaml":              configMap("web", "good"),
		"broken/kustomization.yaml": "resources: [missing.yaml]\n",
		"remote/kustomization.yaml": "resources:\n  - github.com/example/manifests//base?ref=v1\n",
	}, "good")
	gs := gitSync("bad", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "app"
		gs.Spec.Destination = toCluster(member.Name, ns)
	})
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+good)
	waitValue(t, member, ns, "web", "good")
	delivered := resourcesOf(t, gs)
	token := map[string][]byte{"bearerToken": []byte("team-b-git-token")}
	createSecret(t, "git-elsewhere", token, "https://git.example.com/team-b")
	createSecret(t, "git-listed", token, repo.URL())

	cases := []struct {
		name    string
		source  func(*vidrav1alpha1.GitSource)
		reason  string
		stalled bool
		says    []string
	}{
		{"unreachable URL", func(s *vidrav1alpha1.GitSource) { s.URL = "http://127.0.0.1:1/nowhere.git" },
			vidrav1alpha1.ReasonFetchFailed, false, []string{"127.0.0.1:1"}},
		{"missing branch", func(s *vidrav1alpha1.GitSource) { s.Ref = &vidrav1alpha1.GitRef{Branch: "nope"} },
			vidrav1alpha1.ReasonRefNotFound, false, []string{"nope"}},
		{"missing tag", func(s *vidrav1alpha1.GitSource) { s.Ref = &vidrav1alpha1.GitRef{Tag: "v9.9.9"} },
			vidrav1alpha1.ReasonRefNotFound, false, []string{"v9.9.9"}},
		{"missing commit", func(s *vidrav1alpha1.GitSource) {
			s.Ref = &vidrav1alpha1.GitRef{Commit: strings.Repeat("ab", 20)}
		}, vidrav1alpha1.ReasonRefNotFound, false, []string{strings.Repeat("ab", 20)}},
		{"missing path", func(s *vidrav1alpha1.GitSource) { s.Path = "deploy/nope" },
			vidrav1alpha1.ReasonBuildFailed, false, []string{"deploy/nope"}},
		{"Kustomize build error", func(s *vidrav1alpha1.GitSource) { s.Path = "broken" },
			vidrav1alpha1.ReasonBuildFailed, false, []string{"missing.yaml"}},
		{"remote Kustomize base", func(s *vidrav1alpha1.GitSource) { s.Path = "remote" },
			vidrav1alpha1.ReasonBuildFailed, false, []string{"github.com/example/manifests//base?ref=v1"}},
		{"plain http without insecureAllowHTTP", func(s *vidrav1alpha1.GitSource) { s.InsecureAllowHTTP = false },
			vidrav1alpha1.ReasonSourceInvalid, true, []string{"insecureAllowHTTP"}},
		{"missing Secret", func(s *vidrav1alpha1.GitSource) {
			s.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "no-such-secret"}
		},
			vidrav1alpha1.ReasonSourceInvalid, true, []string{"no-such-secret"}},
		{"a Secret that does not list the URL", func(s *vidrav1alpha1.GitSource) {
			s.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "git-elsewhere"}
		}, vidrav1alpha1.ReasonCredentialsRefused, true, []string{"git-elsewhere may be sent only to https://git.example.com/team-b"}},
		{"a Secret its author may not use", func(s *vidrav1alpha1.GitSource) {
			s.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "git-listed"}
		}, vidrav1alpha1.ReasonCredentialsRefused, true, []string{"team-b, who last changed GitSync bad, may not use Secret " + namespace + "/git-listed", "the verb use"}},
	}
	// Who last changed the sync, where it is not the admin (who may use every Secret).
	authors := map[string]string{"a Secret its author may not use": "team-b"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			update(t, gs, func() {
				gs.Spec.Source = vidrav1alpha1.GitSource{URL: repo.URL(), Path: "app", InsecureAllowHTTP: true}
				c.source(&gs.Spec.Source)
				setAuthor(gs, authors[c.name])
			})
			condition(t, gs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, c.reason)
			if msg := readyMessage(gs); !containsAll(msg, c.says...) {
				t.Errorf("Ready says %q, want it to name %q", msg, c.says)
			}
			if c.stalled {
				condition(t, gs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, c.reason)
			}
			waitEvent(t, gs, c.reason, c.says...)
			if gs.Status.Source == nil || gs.Status.Source.Revision != "main@sha1:"+good || !containsAll(gs.Status.Source.Message, c.says...) {
				t.Errorf("status.source = %+v, want the delivered revision and a message naming the cause", gs.Status.Source)
			}
			if v := valueOf(t, member, ns, "web"); v != "good" {
				t.Errorf("the delivered ConfigMap has %q, want it kept", v)
			}
			now := resourcesOf(t, gs)
			if len(now) != len(delivered) || now[0].Spec.Manifest != delivered[0].Spec.Manifest || now[0].Spec.Content != nil {
				t.Errorf("the VidraResources changed on a failed fetch: %d, want %d unchanged", len(now), len(delivered))
			}
		})
	}

	// Mended, it delivers again.
	update(t, gs, func() {
		gs.Spec.Source = vidrav1alpha1.GitSource{URL: repo.URL(), Path: "app", InsecureAllowHTTP: true}
		setAuthor(gs, "")
	})
	ready(t, gs)
}

// Wrong credentials are AuthenticationFailed; the password is in no status, Event or
// message.
func TestWrongCredentialsAreReportedWithoutThem(t *testing.T) {
	const password, wrong = "s3cret-right-password", "wr0ng-password-value"
	srv := gitserver.New(t)
	srv.RequireBasicAuth("deployer", password)
	repo := srv.Repo(t, "private")
	repo.Commit(t, "main", map[string]string{"web.yaml": configMap("private", "v1")}, "private")
	createSecret(t, "git-wrong", map[string][]byte{"username": []byte("deployer"), "password": []byte(wrong)}, repo.URL())
	createSecret(t, "git-right", map[string][]byte{"username": []byte("deployer"), "password": []byte(password)}, repo.URL())
	createNamespace(t, "gs-auth")

	gs := gitSync("auth", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "git-wrong"}
		gs.Spec.Destination = toCluster(fleet.Members[0].Name, "gs-auth")
	})
	create(t, gs)
	condition(t, gs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonAuthenticationFailed)
	waitEvent(t, gs, vidrav1alpha1.ReasonAuthenticationFailed)
	assertNoSecretIn(t, gs, wrong, password)

	update(t, gs, func() { gs.Spec.Source.SecretRef.Name = "git-right" })
	ready(t, gs)
	waitValue(t, fleet.Members[0], "gs-auth", "private", "v1")
	assertNoSecretIn(t, gs, wrong, password)
}

// assertNoSecretIn fails when any secret shows in the sync's status or Events.
func assertNoSecretIn(t *testing.T, s sync, secrets ...string) {
	t.Helper()
	status, err := json.Marshal(s.SourceStatus())
	if err != nil {
		t.Fatal(err)
	}
	var events eventsv1.EventList
	if err := fleet.Hub.Client.List(context.Background(), &events); err != nil {
		t.Fatal(err)
	}
	for _, secret := range secrets {
		if strings.Contains(string(status), secret) {
			t.Errorf("status holds a credential: %s", status)
		}
		for _, e := range events.Items {
			if strings.Contains(e.Note, secret) {
				t.Errorf("Event %s holds a credential: %s", e.Name, e.Note)
			}
		}
	}
}

// While the source cannot be reached, the bundle fetched before still reaches a cluster
// that joins the selection; the sync says why its source is not read.
func TestAClusterJoiningWhileTheSourceIsDownGetsTheBundleFetchedBefore(t *testing.T) {
	const ns = "gs-down"
	createNamespace(t, ns)
	joining, first := fleet.Members[1], fleet.Members[0]
	setClusterLabel(t, first.Name, "gs-down", "yes")
	t.Cleanup(func() { setClusterLabel(t, first.Name, "gs-down", "") })
	srv := gitserver.New(t)
	repo := srv.Repo(t, "down")
	commit := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "fetched")}, "fetched")
	gs := gitSync("down", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination = vidrav1alpha1.SyncDestination{
			Destination:     vidrav1alpha1.Destination{Namespace: ns},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gs-down": "yes"}},
		}
	})
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+commit)
	waitValue(t, first, ns, "web", "fetched")

	srv.Close()
	requestSync(t, gs)
	condition(t, gs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonFetchFailed)
	setClusterLabel(t, joining.Name, "gs-down", "yes")
	t.Cleanup(func() { setClusterLabel(t, joining.Name, "gs-down", "") })
	waitValue(t, joining, ns, "web", "fetched")
	condition(t, gs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonFetchFailed)
	if src := gs.Status.Source; src == nil || src.Revision != "main@sha1:"+commit {
		t.Errorf("status.source = %+v, want the revision fetched before", src)
	}
}

// setAuthor records who last changed the sync, as the chart's admission policy would: the
// user of a team, or the admin ("").
func setAuthor(s sync, user string) {
	annotations := s.GetAnnotations()
	annotations[vidrav1alpha1.RequestedByAnnotation], annotations[vidrav1alpha1.RequestedByGroupsAnnotation] = "default", "system:masters"
	if user != "" {
		annotations[vidrav1alpha1.RequestedByAnnotation], annotations[vidrav1alpha1.RequestedByGroupsAnnotation] = user, user+"-devs"
	}
	s.SetAnnotations(annotations)
}
