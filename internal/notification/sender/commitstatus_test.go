package sender

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

const sha = "0123456789abcdef0123456789abcdef01234567"

func gitSyncEvent(reason, message string, metadata map[string]string) *eventv1.Event {
	return &eventv1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "GitSync", Name: "web"},
		Reason:         reason, Message: message, Metadata: metadata,
	}
}

// Each host gets the status at its own API, in its own words, with its own token header.
func TestCommitStatusesGoWhereEachHostTakesThem(t *testing.T) {
	type request struct {
		path, auth string
		body       map[string]string
	}
	got := make(chan request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		auth := r.Header.Get("Authorization") + r.Header.Get("PRIVATE-TOKEN")
		got <- request{path: r.URL.EscapedPath(), auth: auth, body: body}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	ready := gitSyncEvent(vidrav1alpha1.EventRevisionReady, "revision main@sha1:"+sha+" Ready on 3 of 3 clusters",
		map[string]string{"revision": "main@sha1:" + sha, "clusters": "3 of 3"})
	for _, tc := range []struct {
		typ, repo, path, auth, stateKey, nameKey string
	}{
		{vidrav1alpha1.AlertProviderGitHub, "/org/repo", "/api/v3/repos/org/repo/statuses/" + sha, "Bearer tok", "state", "context"},
		{vidrav1alpha1.AlertProviderGitLab, "/group/sub/repo.git", "/api/v4/projects/group%2Fsub%2Frepo/statuses/" + sha, "tok", "state", "name"},
		{vidrav1alpha1.AlertProviderGitea, "/org/repo", "/api/v1/repos/org/repo/statuses/" + sha, "token tok", "state", "context"},
	} {
		s, err := New(Config{Type: tc.typ, Address: srv.URL + tc.repo, Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(context.Background(), srv.Client(), ready); err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		r := <-got
		if r.path != tc.path || r.auth != tc.auth || r.body[tc.stateKey] != "success" || r.body[tc.nameKey] != "vidra/gitsync/web" ||
			r.body["description"] != "Ready on 3 of 3 clusters" {
			t.Errorf("%s: %s %q %v", tc.typ, r.path, r.auth, r.body)
		}
	}
	if cs, _ := New(Config{Type: vidrav1alpha1.AlertProviderGitHub, Address: "https://github.com/org/repo", Token: "t"}); cs.(*commitStatus).api != "https://api.github.com" {
		t.Errorf("github.com's API = %s", cs.(*commitStatus).api)
	}
}

// A revision's events set its commit's state; an event that names no commit, or says
// nothing of one, is not sent.
func TestCommitStatesFollowTheRevision(t *testing.T) {
	rev := map[string]string{"revision": "main@sha1:" + sha}
	for reason, want := range map[string]string{
		vidrav1alpha1.EventBundleUpdated: "pending", vidrav1alpha1.EventWaveStarted: "pending",
		vidrav1alpha1.EventRevisionReady: "success", vidrav1alpha1.EventClusterFailed: "failure",
		vidrav1alpha1.ReasonRolledBack: "failure", vidrav1alpha1.ReasonSourceInvalid: "",
		vidrav1alpha1.EventPreviewReady: "success", vidrav1alpha1.EventPreviewFailed: "failure",
	} {
		state, ok := StateOf(gitSyncEvent(reason, "", rev))
		if state != want || ok != (want != "") {
			t.Errorf("%s: state %q (%v), want %q", reason, state, ok, want)
		}
	}
	failed := gitSyncEvent(vidrav1alpha1.EventClusterFailed, "GitSync web failed on cluster edge-1: ApplyFailed: "+strings.Repeat("x", 300),
		map[string]string{"revision": "main@sha1:" + sha, "cluster": "edge-1", "clusters": "2 of 3"})
	if d := Description(failed, "failure"); !strings.HasPrefix(d, "2 of 3 clusters Ready; failed on edge-1: ApplyFailed: x") || len(d) > MaxDescription {
		t.Errorf("description = %q (%d)", d, len(d))
	}
	preview := gitSyncEvent(vidrav1alpha1.EventPreviewReady, "refs/pull/1/head at ...", map[string]string{
		"revision": "refs/pull/1/head@sha1:" + sha, "preview": "3 of 40 clusters change: +2 ~5 -1"})
	if c, d := StatusContext(preview), Description(preview, "success"); c != "vidra/preview/web" || d != "3 of 40 clusters change: +2 ~5 -1" {
		t.Errorf("a preview's status: %s %q", c, d)
	}
	for _, rev := range []string{"main@sha1:" + sha, "sha1:" + sha, sha, "refs/pull/1/head@sha1:" + sha} {
		if CommitOf(rev) != sha {
			t.Errorf("CommitOf(%q) = %q", rev, CommitOf(rev))
		}
	}
	for _, rev := range []string{"v1.2.3@sha256:" + strings.Repeat("a", 64), "1.2.3", ""} {
		if c := CommitOf(rev); c != "" {
			t.Errorf("CommitOf(%q) = %q, want none", rev, c)
		}
	}
	// Nothing sent: no server listens, and no error comes.
	s, _ := New(Config{Type: vidrav1alpha1.AlertProviderGitHub, Address: "http://127.0.0.1:1/org/repo", Token: "t"})
	for _, ev := range []*eventv1.Event{
		gitSyncEvent(vidrav1alpha1.EventRevisionReady, "", map[string]string{"revision": "v1@sha256:" + strings.Repeat("a", 64)}),
		gitSyncEvent(vidrav1alpha1.ReasonSourceInvalid, "", rev),
	} {
		if err := s.Send(context.Background(), http.DefaultClient, ev); err != nil {
			t.Errorf("%s: %v", ev.Reason, err)
		}
	}
}

// GitLab refuses a status the commit has already; that is no failure.
func TestGitLabsRefusalOfTheSameStateIsNoFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"message":"Cannot transition status via :run from :running"}`))
	}))
	t.Cleanup(srv.Close)
	s, _ := New(Config{Type: vidrav1alpha1.AlertProviderGitLab, Address: srv.URL + "/g/r", Token: "t"})
	ev := gitSyncEvent(vidrav1alpha1.EventBundleUpdated, "changed", map[string]string{"revision": sha})
	if err := s.Send(context.Background(), srv.Client(), ev); err != nil {
		t.Errorf("GitLab's same-state answer: %v", err)
	}
}
