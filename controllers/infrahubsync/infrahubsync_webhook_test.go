package infrahubsync_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/hooks"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const webhookKey = "supersecretkey"

// newReceiver serves the webhook receiver over HTTP with the shared key in a Secret.
func newReceiver(t testing.TB, now func() time.Time) string {
	t.Helper()
	secretName := fmt.Sprintf("webhook-key-%d", time.Now().UnixNano())
	createSecret(t, secretName, nil, map[string][]byte{hooks.KeyField: []byte(webhookKey)})
	log, err := testfleet.Logger()
	if err != nil {
		t.Fatal(err)
	}
	r := &hooks.Receiver{
		Hub: fleet.Hub.Client, Secrets: fleet.Hub.Client, Log: log.WithName("webhook"), Now: now,
		KeySecret: types.NamespacedName{Namespace: namespace, Name: secretName},
	}
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + hooks.InfrahubPath
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
	return status(t, signed(t, url, []byte(key), fmt.Sprintf("msg_%d", time.Now().UnixNano()), ts, body))
}

// signed is a delivery of body to url, signed with key as webhook-id id at ts.
func signed(t testing.TB, url string, key []byte, id string, ts time.Time, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(infrahub.HeaderWebhookID, id)
	req.Header.Set(infrahub.HeaderWebhookTimestamp, fmt.Sprint(ts.Unix()))
	req.Header.Set(infrahub.HeaderWebhookSignature, infrahub.SignWebhook(key, id, ts.Unix(), body))
	return req
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

// ?infrahub= narrows a delivery to the syncs of one Infrahub only when the delivery is
// signed with the key derived for that name: a signed delivery replayed with another
// name, or without one, is refused, and so is a name added to a delivery signed with the
// shared key.
func TestAnInfrahubNamedInTheWebhookURLMustBeSignedFor(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"paris", "lyon"} {
		ihs := &vidrav1alpha1.InfrahubSync{
			ObjectMeta: metav1.ObjectMeta{Name: "source-" + name},
			Spec: vidrav1alpha1.InfrahubSyncSpec{
				// Made up: the sync fails to list, which leaves the annotation to read.
				Source:   vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub-" + name + ".example.com", ArtefactName: "source-definition"},
				Interval: &metav1.Duration{Duration: time.Hour},
			},
		}
		if err := fleet.Hub.Client.Create(ctx, ihs); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), ihs) })
	}
	url := newReceiver(t, nil)
	const paris = "infrahub-paris.example.com"
	parisKey := infrahub.SourceKey([]byte(webhookKey), paris)
	now := time.Now()
	body := event("evt-source-1", "main", "source-definition", "a-1")

	// Signed for paris: paris only.
	if code := status(t, signed(t, url+"?infrahub="+paris, parisKey, "msg_s1", now, body)); code != http.StatusAccepted {
		t.Fatalf("delivery signed for its ?infrahub=: HTTP %d, want 202", code)
	}
	if requestedAt(t, "source-paris") == "" || requestedAt(t, "source-lyon") != "" {
		t.Fatalf("a delivery for %s requested paris %q and lyon %q; want paris only", paris, requestedAt(t, "source-paris"), requestedAt(t, "source-lyon"))
	}

	// The same signed delivery, its name changed or dropped, and the name added to a
	// delivery signed with the shared key: refused. Fresh event IDs, so that a refusal
	// is the signature's and not the duplicate check's.
	retarget := event("evt-source-2", "main", "source-definition", "a-1")
	sig := signed(t, url, parisKey, "msg_s2", now, retarget).Header.Get(infrahub.HeaderWebhookSignature)
	for _, tt := range []struct {
		name, query string
		key         []byte
	}{
		{"replayed for another Infrahub", "?infrahub=infrahub-lyon.example.com", nil},
		{"replayed without its name", "", nil},
		{"replayed with the name spelt as a URL", "?infrahub=https://" + paris, nil},
		{"a name added to a delivery signed with the shared key", "?infrahub=infrahub-lyon.example.com", []byte(webhookKey)},
	} {
		req := signed(t, url+tt.query, []byte(webhookKey), "msg_s2", now, retarget)
		if tt.key == nil {
			req.Header.Set(infrahub.HeaderWebhookSignature, sig)
		}
		if code := status(t, req); code != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401", tt.name, code)
		}
	}
	twice := signed(t, url+"?infrahub="+paris+"&infrahub=infrahub-lyon.example.com", parisKey, "msg_s3", now, retarget)
	if code := status(t, twice); code != http.StatusBadRequest {
		t.Errorf("two ?infrahub=: HTTP %d, want 400", code)
	}
	if got := requestedAt(t, "source-lyon"); got != "" {
		t.Fatalf("a refused delivery requested a sync of source-lyon (%s)", got)
	}

	// Without a name, signed with the shared key: every Infrahub's sync.
	if code := status(t, signed(t, url, []byte(webhookKey), "msg_s4", now, retarget)); code != http.StatusAccepted {
		t.Fatalf("delivery without ?infrahub=: HTTP %d, want 202", code)
	}
	if requestedAt(t, "source-lyon") == "" {
		t.Error("a delivery without ?infrahub= did not request the sync of the other Infrahub")
	}
}

// countingReader counts the reads of the webhook key's Secret; while gate is set, a read
// waits for it to close.
type countingReader struct {
	client.Reader
	reads atomic.Int64
	mu    sync.Mutex
	gate  chan struct{}
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.reads.Add(1)
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// Deliveries, signed or not, cannot make the receiver ask the API server for a missing
// key Secret more than once per 10 seconds; once the Secret exists, it is read within
// 10 seconds; while it is read again, other deliveries are verified with the key read
// before, not held up.
func TestAMissingWebhookSecretIsReadOncePerRefresh(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	secretName := fmt.Sprintf("webhook-key-missing-%d", time.Now().UnixNano())
	reader := &countingReader{Reader: fleet.Hub.Client}
	log, err := testfleet.Logger()
	if err != nil {
		t.Fatal(err)
	}
	r := &hooks.Receiver{
		Hub: fleet.Hub.Client, Secrets: reader, Log: log.WithName("webhook"), Now: now,
		KeySecret: types.NamespacedName{Namespace: namespace, Name: secretName},
	}
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(srv.Close)
	url := srv.URL + hooks.InfrahubPath

	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			// Signed as a delivery looks (a signature is checked only once the key is read).
			req := signed(t, url, []byte("some key"), fmt.Sprintf("msg_x%d", i), now(), fmt.Appendf(nil, `{"id":"x-%d"}`, i))
			if code := status(t, req); code != http.StatusServiceUnavailable {
				t.Errorf("a delivery while the key's Secret is missing: HTTP %d, want 503", code)
			}
		})
	}
	wg.Wait()
	if n := reader.reads.Load(); n != 1 {
		t.Fatalf("40 deliveries read the missing Secret %d times, want once", n)
	}

	// Created: still missing until the outcome is 10 seconds old, then read again.
	createSecret(t, secretName, nil, map[string][]byte{hooks.KeyField: []byte(webhookKey)})
	unrelated := func(id string) []byte { return event(id, "no-such-branch", "", "a") }
	if code := status(t, signed(t, url, []byte(webhookKey), "msg_c1", now(), unrelated("evt-c1"))); code != http.StatusServiceUnavailable {
		t.Errorf("within 10s of the missing read: HTTP %d, want 503", code)
	}
	clock.Add(int64(11 * time.Second))
	if code := status(t, signed(t, url, []byte(webhookKey), "msg_c2", now(), unrelated("evt-c2"))); code != http.StatusAccepted {
		t.Fatalf("10s after the Secret was created: HTTP %d, want 202", code)
	}
	if n := reader.reads.Load(); n != 2 {
		t.Fatalf("%d reads of the Secret, want 2", n)
	}

	// The API server is slow to answer the next read: the delivery that started it
	// waits, the others go on with the key already read.
	gate := make(chan struct{})
	reader.mu.Lock()
	reader.gate = gate
	reader.mu.Unlock()
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	clock.Add(int64(11 * time.Second))
	first := make(chan int, 1)
	go func() { first <- status(t, signed(t, url, []byte(webhookKey), "msg_c3", now(), unrelated("evt-c3"))) }()
	testfleet.Eventually(t, 10*time.Second, "the refresh read to start", func() (bool, error) { return reader.reads.Load() == 3, nil })
	done := make(chan int, 1)
	go func() { done <- status(t, signed(t, url, []byte(webhookKey), "msg_c4", now(), unrelated("evt-c4"))) }()
	select {
	case code := <-done:
		if code != http.StatusAccepted {
			t.Errorf("a delivery during the refresh: HTTP %d, want 202", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a delivery waited for another's read of the Secret")
	}
	close(gate)
	if code := <-first; code != http.StatusAccepted {
		t.Errorf("the delivery that refreshed the key: HTTP %d, want 202", code)
	}
	if n := reader.reads.Load(); n != 3 {
		t.Errorf("%d reads of the Secret, want 3", n)
	}
}
