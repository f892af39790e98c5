package sender

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// received is one request a receiver on loopback got.
type received struct {
	header http.Header
	body   []byte
}

// receiver answers code to each request and hands it on.
func receiver(t *testing.T, code int) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{header: r.Header.Clone(), body: body}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func anEvent() *eventv1.Event {
	return &eventv1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "GitSync", Name: "web", APIVersion: "infrahub.operators.com/v1alpha1"},
		Severity:       eventv1.EventSeverityError,
		Message:        "GitSync web failed on cluster edge-1: ApplyFailed: denied",
		Reason:         vidrav1alpha1.EventClusterFailed,
		Metadata:       map[string]string{"cluster": "edge-1", "revision": "main@sha1:abc"},
	}
}

func TestGenericHMACSignsTheBodyAsFluxDoes(t *testing.T) {
	srv, got := receiver(t, http.StatusOK)
	s, err := New(Config{Type: vidrav1alpha1.AlertProviderGenericHMAC, Address: srv.URL + "/hook", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), srv.Client(), anEvent()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if want := Signature([]byte("s3cret"), r.body); r.header.Get("X-Signature") != want || !strings.HasPrefix(want, "sha256=") {
		t.Errorf("X-Signature = %q, want %q", r.header.Get("X-Signature"), want)
	}
	var ev eventv1.Event
	if err := json.Unmarshal(r.body, &ev); err != nil {
		t.Fatalf("the body is not Flux's event: %v", err)
	}
	if ev.InvolvedObject.Name != "web" || ev.Metadata["cluster"] != "edge-1" || ev.Severity != "error" {
		t.Errorf("event sent = %+v", ev)
	}
	if _, err := New(Config{Type: vidrav1alpha1.AlertProviderGenericHMAC, Address: srv.URL}); err == nil {
		t.Error("generic-hmac without a token was accepted")
	}
}

func TestGenericSendsNoSignature(t *testing.T) {
	srv, got := receiver(t, http.StatusAccepted)
	s, err := New(Config{Type: vidrav1alpha1.AlertProviderGeneric, Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), srv.Client(), anEvent()); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.header.Get("X-Signature") != "" || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers = %v", r.header)
	}
}

func TestSlackAndTeamsGetTheirOwnPayloads(t *testing.T) {
	srv, got := receiver(t, http.StatusOK)
	slack, _ := New(Config{Type: vidrav1alpha1.AlertProviderSlack, Address: srv.URL, Channel: "#fleet"})
	if err := slack.Send(context.Background(), srv.Client(), anEvent()); err != nil {
		t.Fatal(err)
	}
	var sp slackPayload
	if err := json.Unmarshal((<-got).body, &sp); err != nil {
		t.Fatal(err)
	}
	if sp.Channel != "#fleet" || len(sp.Attachments) != 1 || sp.Attachments[0].Color != "danger" ||
		sp.Attachments[0].AuthorName != "gitsync/web" || len(sp.Attachments[0].Fields) != 2 {
		t.Errorf("Slack payload = %+v", sp)
	}
	teams, _ := New(Config{Type: vidrav1alpha1.AlertProviderMSTeams, Address: srv.URL})
	if err := teams.Send(context.Background(), srv.Client(), anEvent()); err != nil {
		t.Fatal(err)
	}
	body := string((<-got).body)
	for _, want := range []string{`"application/vnd.microsoft.card.adaptive"`, `"AdaptiveCard"`, `"FactSet"`, "edge-1"} {
		if !strings.Contains(body, want) {
			t.Errorf("Teams card lacks %s: %s", want, body)
		}
	}
}

func TestErrorsNameTheHostAloneAndSayWhetherToRetry(t *testing.T) {
	for code, retry := range map[int]bool{500: true, 503: true, 429: true, 400: false, 404: false} {
		srv, _ := receiver(t, code)
		s, _ := New(Config{Type: vidrav1alpha1.AlertProviderSlack, Address: srv.URL + "/services/T000/B000/XXXXSECRET"})
		err := s.Send(context.Background(), srv.Client(), anEvent())
		var status *StatusError
		if !errors.As(err, &status) || status.Code != code || Retryable(err) != retry {
			t.Errorf("answer %d: err %v, retryable %v, want %v", code, err, Retryable(err), retry)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the error names the webhook's path: %v", err)
		}
	}
	// Nobody listens: retried, and the path is not named either.
	srv, _ := receiver(t, 200)
	srv.Close()
	s, _ := New(Config{Type: vidrav1alpha1.AlertProviderSlack, Address: srv.URL + "/services/XXXXSECRET"})
	err := s.Send(context.Background(), http.DefaultClient, anEvent())
	if err == nil || !Retryable(err) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("unreachable receiver: %v (retryable %v)", err, Retryable(err))
	}
}

func TestAProviderThatCannotBeUsedIsRefused(t *testing.T) {
	for _, c := range []Config{
		{Type: vidrav1alpha1.AlertProviderGeneric, Address: "ftp://example.com"},
		{Type: vidrav1alpha1.AlertProviderGeneric, Address: ""},
		{Type: vidrav1alpha1.AlertProviderGitHub, Address: "https://github.com/org/repo"}, // no token
		{Type: vidrav1alpha1.AlertProviderGitHub, Address: "https://github.com/org", Token: "t"},
		{Type: vidrav1alpha1.AlertProviderGitea, Address: "https://gitea.example.com/org/group/repo", Token: "t"},
		{Type: "pagerduty", Address: "https://example.com"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
