package infrahubsync_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/infrahubsync"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const webhookKey = "supersecretkey"

// newReceiver serves the webhook receiver over HTTP with the shared key in a Secret.
func newReceiver(t testing.TB, now func() time.Time) string {
	t.Helper()
	secretName := fmt.Sprintf("webhook-key-%d", time.Now().UnixNano())
	createSecret(t, secretName, nil, map[string][]byte{infrahubsync.WebhookKeyField: []byte(webhookKey)})
	log, err := testfleet.Logger()
	if err != nil {
		t.Fatal(err)
	}
	r := &infrahubsync.Receiver{
		Hub: fleet.Hub.Client, Secrets: fleet.Hub.Client, Log: log.WithName("webhook"), Now: now,
		KeySecret: types.NamespacedName{Namespace: namespace, Name: secretName},
	}
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + infrahubsync.WebhookPath
}

// event is an artifact event body, as Infrahub sends it.
func event(id, branch, definition, artifactID string) []byte {
	body, _ := json.Marshal(map[string]any{
		"data": map[string]any{
			"node_id": artifactID, "artifact_definition_id": "def", "artifact_definition_name": definition,
			"target_id": "node", "target_kind": "InfraSite", "checksum": "x", "checksum_previous": nil,
			"storage_id": "s", "storage_id_previous": nil,
		},
		"id": id, "branch": branch, "account_id": "acct", "occured_at": "2026-01-01 00:00:00.000000+00:00",
		"event": infrahub.EventArtifactUpdated,
	})
	return body
}

// deliver posts a body signed with key at ts, and returns the HTTP status.
func deliver(t testing.TB, url string, key string, ts time.Time, body []byte) int {
	t.Helper()
	id := fmt.Sprintf("msg_%d", time.Now().UnixNano())
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(infrahub.HeaderWebhookID, id)
	req.Header.Set(infrahub.HeaderWebhookTimestamp, fmt.Sprint(ts.Unix()))
	req.Header.Set(infrahub.HeaderWebhookSignature, infrahub.SignWebhook([]byte(key), id, ts.Unix(), body))
	return status(t, req)
}

// status sends req and returns the HTTP status of the answer.
func status(t testing.TB, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func requestedAt(t *testing.T, name string) string {
	t.Helper()
	return getSync(t, name).Annotations[vidrav1alpha1.RequestedAtAnnotation]
}

// A signed artifact event syncs the InfrahubSyncs it concerns at once (their interval is
// an hour); forged, stale, replayed and unrelated deliveries sync nothing.
func TestSignedWebhooksTriggerASyncAndForgedOnesDoNot(t *testing.T) {
	member := fleet.Members[0]
	s := newInfrahub(t, "hooked", infrahubtest.Options{})
	const ns = "ihs-hooked"
	putSites(s, "main", ns, "v1", "paris")
	newSync(t, "hooked", "hooked", s, withCluster(member.Name))
	allReady(t, "hooked", 1)
	syncReady(t, "hooked")
	url := newReceiver(t, nil)

	// Forged, stale, unrelated: refused or ignored, and nothing listed.
	putSites(s, "main", ns, "v2", "paris")
	listed := s.GraphQLRequests()
	body := event("evt-1", "main", "web-definition", "web-paris")
	for _, tt := range []struct {
		name string
		key  string
		ts   time.Time
		body []byte
		want int
	}{
		{"wrong key", "guessed", time.Now(), body, http.StatusUnauthorized},
		{"signed more than 5 minutes ago", webhookKey, time.Now().Add(-6 * time.Minute), body, http.StatusUnauthorized},
		{"another branch", webhookKey, time.Now(), event("evt-2", "feature", "web-definition", "web-paris"), http.StatusAccepted},
		{"another artifact definition", webhookKey, time.Now(), event("evt-3", "main", "dns-definition", "dns-1"), http.StatusAccepted},
	} {
		if got := deliver(t, url, tt.key, tt.ts, tt.body); got != tt.want {
			t.Errorf("%s: HTTP %d, want %d", tt.name, got, tt.want)
		}
	}
	tampered := bytes.Replace(body, []byte("evt-1"), []byte("evt-9"), 1)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(tampered))
	ts := time.Now().Unix()
	req.Header.Set(infrahub.HeaderWebhookID, "msg_1")
	req.Header.Set(infrahub.HeaderWebhookTimestamp, fmt.Sprint(ts))
	req.Header.Set(infrahub.HeaderWebhookSignature, infrahub.SignWebhook([]byte(webhookKey), "msg_1", ts, body))
	if code := status(t, req); code != http.StatusUnauthorized {
		t.Errorf("tampered body: HTTP %d, want 401", code)
	}
	unsigned, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if code := status(t, unsigned); code != http.StatusUnauthorized {
		t.Errorf("unsigned: HTTP %d, want 401", code)
	}
	time.Sleep(time.Second) // would a sync have started, it would have listed by now
	if requestedAt(t, "hooked") != "" || s.GraphQLRequests() != listed || configMapValue(t, member, ns, "paris") != "v1" {
		t.Fatalf("a refused or unrelated delivery triggered a sync (listings %d -> %d)", listed, s.GraphQLRequests())
	}

	// Signed: synced at once.
	start := time.Now()
	if got := deliver(t, url, webhookKey, time.Now(), body); got != http.StatusAccepted {
		t.Fatalf("signed delivery: HTTP %d, want 202", got)
	}
	waitValue(t, member, ns, "paris", "v2")
	t.Logf("webhook delivered -> applied on %s in %v", member.Name, time.Since(start).Round(time.Millisecond))
	stamp := requestedAt(t, "hooked")

	// The same event again (Infrahub's retry, with a new webhook-id): ignored.
	if got := deliver(t, url, webhookKey, time.Now(), body); got != http.StatusOK {
		t.Errorf("duplicate delivery: HTTP %d, want 200", got)
	}
	if requestedAt(t, "hooked") != stamp {
		t.Error("a duplicate delivery requested another sync")
	}

	// An event that does not name its definition syncs every sync of its branch.
	putSites(s, "main", ns, "v3", "paris")
	if got := deliver(t, url, webhookKey, time.Now(), event("evt-4", "main", "", "anything")); got != http.StatusAccepted {
		t.Fatalf("delivery without a definition name: HTTP %d", got)
	}
	waitValue(t, member, ns, "paris", "v3")
}

// The reference's test vector is accepted as signed (at its own time); malformed
// deliveries are refused.
func TestWebhookReceiverAcceptsTheReferenceVectorAndRefusesMalformedDeliveries(t *testing.T) {
	vectorTime := time.Unix(1741884272, 0)
	url := newReceiver(t, func() time.Time { return vectorTime })
	body := `{"data":{"node_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000001","artifact_definition_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000002","artifact_definition_name":"k8s-manifests","target_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000003","target_kind":"InfraCluster","checksum":"9a0364b9e99bb480dd25e1f0284c8555","checksum_previous":null,"storage_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000004","storage_id_previous":null},"id":"2ece726f-8574-488c-92f7-ee9a56485b46","branch":"main","account_id":"182c6918-8880-5252-3611-c51ae7e0d6a5","occured_at":"2025-03-13 16:44:32.321142+00:00","event":"infrahub.artifact.created"}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set(infrahub.HeaderWebhookID, "msg_0123456789abcdef0123456789abcdef")
	req.Header.Set(infrahub.HeaderWebhookTimestamp, "1741884272")
	req.Header.Set(infrahub.HeaderWebhookSignature, "v1,0fpmd2I6LFYKfHbNnOp1X7+lQwKaUP4cgf3jinj0fko=")
	if code := status(t, req); code != http.StatusAccepted {
		t.Fatalf("reference vector: HTTP %d, want 202", code)
	}

	huge := bytes.Repeat([]byte("x"), 1<<20)
	if got := deliver(t, url, webhookKey, vectorTime, huge); got != http.StatusRequestEntityTooLarge {
		t.Errorf("1 MiB body: HTTP %d, want 413", got)
	}
	if got := deliver(t, url, webhookKey, vectorTime, []byte(`{"id":`)); got != http.StatusBadRequest {
		t.Errorf("signed body that is not JSON: HTTP %d, want 400", got)
	}
	get, _ := http.NewRequest(http.MethodGet, url, nil)
	if code := status(t, get); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: HTTP %d, want 405", code)
	}
}
