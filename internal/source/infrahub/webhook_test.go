package infrahub

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// The test vector of Infrahub's webhook reference.
const (
	vectorKey       = "supersecretkey"
	vectorID        = "msg_0123456789abcdef0123456789abcdef"
	vectorTimestamp = 1741884272
	vectorBody      = `{"data":{"node_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000001","artifact_definition_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000002","artifact_definition_name":"k8s-manifests","target_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000003","target_kind":"InfraCluster","checksum":"9a0364b9e99bb480dd25e1f0284c8555","checksum_previous":null,"storage_id":"18a6d5a2-7c4e-4b3e-8d4f-000000000004","storage_id_previous":null},"id":"2ece726f-8574-488c-92f7-ee9a56485b46","branch":"main","account_id":"182c6918-8880-5252-3611-c51ae7e0d6a5","occured_at":"2025-03-13 16:44:32.321142+00:00","event":"infrahub.artifact.created"}`
	vectorSignature = "v1,0fpmd2I6LFYKfHbNnOp1X7+lQwKaUP4cgf3jinj0fko="
)

func vectorHeader(signature string) http.Header {
	h := http.Header{}
	h.Set(HeaderWebhookID, vectorID)
	h.Set(HeaderWebhookTimestamp, "1741884272")
	h.Set(HeaderWebhookSignature, signature)
	return h
}

var vectorTime = time.Unix(vectorTimestamp, 0)

func TestSignWebhookMatchesTheReferenceVector(t *testing.T) {
	if got := SignWebhook([]byte(vectorKey), vectorID, vectorTimestamp, []byte(vectorBody)); got != vectorSignature {
		t.Fatalf("signature = %s, want %s", got, vectorSignature)
	}
}

func TestVerifyWebhook(t *testing.T) {
	tampered := []byte(vectorBody)
	tampered[len(tampered)-3] = 'e' // "...created" -> "...createe"
	tests := []struct {
		name    string
		key     string
		header  http.Header
		body    []byte
		now     time.Time
		wantErr error
	}{
		{"reference vector", vectorKey, vectorHeader(vectorSignature), []byte(vectorBody), vectorTime, nil},
		{"one of several signatures", vectorKey, vectorHeader("v1,b2xkc2lnbmF0dXJl " + vectorSignature), []byte(vectorBody), vectorTime, nil},
		{"within tolerance", vectorKey, vectorHeader(vectorSignature), []byte(vectorBody), vectorTime.Add(4 * time.Minute), nil},
		{"tampered body", vectorKey, vectorHeader(vectorSignature), tampered, vectorTime, ErrBadSignature},
		{"body with a trailing newline", vectorKey, vectorHeader(vectorSignature), []byte(vectorBody + "\n"), vectorTime, ErrBadSignature},
		{"wrong key", "anotherkey", vectorHeader(vectorSignature), []byte(vectorBody), vectorTime, ErrBadSignature},
		{"another scheme version", vectorKey, vectorHeader("v1a," + vectorSignature[3:]), []byte(vectorBody), vectorTime, ErrBadSignature},
		{"no signature", vectorKey, vectorHeader(""), []byte(vectorBody), vectorTime, ErrMissingSignature},
		{"older than the tolerance", vectorKey, vectorHeader(vectorSignature), []byte(vectorBody), vectorTime.Add(6 * time.Minute), ErrStaleTimestamp},
		{"from the future", vectorKey, vectorHeader(vectorSignature), []byte(vectorBody), vectorTime.Add(-6 * time.Minute), ErrStaleTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyWebhook([]byte(tt.key), tt.header, tt.body, tt.now, 5*time.Minute)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("VerifyWebhook = %v, want %v", err, tt.wantErr)
			}
		})
	}
	t.Run("timestamp swapped", func(t *testing.T) {
		h := vectorHeader(vectorSignature)
		h.Set(HeaderWebhookTimestamp, "1741884273")
		if err := VerifyWebhook([]byte(vectorKey), h, []byte(vectorBody), vectorTime, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("VerifyWebhook = %v, want %v", err, ErrBadSignature)
		}
	})
}

func TestParseWebhookEvent(t *testing.T) {
	ev, err := ParseWebhookEvent([]byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != "2ece726f-8574-488c-92f7-ee9a56485b46" || ev.Event != EventArtifactCreated || ev.Branch != "main" ||
		ev.Data.ArtifactDefinitionName != "k8s-manifests" || ev.Data.NodeID != "18a6d5a2-7c4e-4b3e-8d4f-000000000001" ||
		ev.OccurredAt == "" || ev.Data.ChecksumPrevious != nil {
		t.Errorf("event = %+v", ev)
	}
	if _, err := ParseWebhookEvent([]byte(`{"data":{}}`)); err == nil {
		t.Error("an event without id and event was accepted")
	}
	if _, err := ParseWebhookEvent([]byte(`not json`)); err == nil {
		t.Error("a body that is not JSON was accepted")
	}
}

// A delivery that names its Infrahub is signed with the key derived for that name: it
// verifies with that key only, not with the shared key nor the key of another name, so
// the name cannot be changed or dropped on a replay.
func TestSourceKeyBindsTheInfrahubNameToTheSignature(t *testing.T) {
	shared := []byte(vectorKey)
	paris := SourceKey(shared, "infrahub-paris.example.com")
	// The derivation is the documented one: printf %s "infrahub=$NAME" | openssl dgst -sha256 -hmac "$KEY" -r.
	if got, want := string(paris), "beb66d7a79b2026e36dc957efd18eff5f3fb6c06bc88fece551f26ebc5bf8b05"; got != want {
		t.Fatalf("SourceKey = %s, want %s (as openssl derives it)", got, want)
	}
	sig := SignWebhook(paris, vectorID, vectorTimestamp, []byte(vectorBody))
	for _, tt := range []struct {
		name string
		key  []byte
		want error
	}{
		{"the key of the name it was signed for", paris, nil},
		{"the shared key (the name dropped)", shared, ErrBadSignature},
		{"the key of another name", SourceKey(shared, "infrahub-lyon.example.com"), ErrBadSignature},
		{"the key of the same host spelt as a URL", SourceKey(shared, "https://infrahub-paris.example.com"), ErrBadSignature},
	} {
		if err := VerifyWebhook(tt.key, vectorHeader(sig), []byte(vectorBody), vectorTime, 5*time.Minute); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}
