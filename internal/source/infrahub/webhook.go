package infrahub

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Artifact events Infrahub sends to webhooks.
const (
	EventArtifactCreated = "infrahub.artifact.created"
	EventArtifactUpdated = "infrahub.artifact.updated"
)

// WebhookEvent is the body of an Infrahub webhook delivery.
type WebhookEvent struct {
	// ID identifies the event; retries of one delivery share it.
	ID        string `json:"id"`
	Event     string `json:"event"`
	Branch    string `json:"branch"`
	AccountID string `json:"account_id"`
	// OccurredAt keeps Infrahub's spelling on the wire.
	OccurredAt string            `json:"occured_at"`
	Data       ArtifactEventData `json:"data"`
}

// ArtifactEventData is the data of an artifact event.
type ArtifactEventData struct {
	NodeID                 string  `json:"node_id"`
	ArtifactDefinitionID   string  `json:"artifact_definition_id"`
	ArtifactDefinitionName string  `json:"artifact_definition_name"`
	TargetID               string  `json:"target_id"`
	TargetKind             string  `json:"target_kind"`
	Checksum               string  `json:"checksum"`
	ChecksumPrevious       *string `json:"checksum_previous"`
	StorageID              string  `json:"storage_id"`
	StorageIDPrevious      *string `json:"storage_id_previous"`
}

// Headers of the Standard Webhooks scheme Infrahub signs with.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// Errors of VerifyWebhook.
var (
	ErrMissingSignature = errors.New("webhook-id, webhook-timestamp and webhook-signature are required")
	ErrBadSignature     = errors.New("no signature matches")
	ErrStaleTimestamp   = errors.New("timestamp outside the tolerance")
)

// SignWebhook returns the webhook-signature header value for a delivery: "v1," and the
// base64 HMAC-SHA256, keyed by key, of "{id}.{timestamp}.{body}".
func SignWebhook(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(webhookMAC(key, id, strconv.FormatInt(timestamp, 10), body))
}

// SourceKey is the key a delivery that names its Infrahub must be signed with: the hex
// HMAC-SHA256, keyed by the shared key, of "infrahub=" and the name exactly as the
// webhook URL's ?infrahub= carries it. Infrahub signs only "{id}.{timestamp}.{body}",
// not the URL, so the name is bound to the signature through the key: a delivery
// replayed with another ?infrahub= (or none) fails verification, and an Infrahub given
// only its own derived key cannot speak for another.
func SourceKey(key []byte, source string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("infrahub="))
	mac.Write([]byte(source))
	return []byte(hex.EncodeToString(mac.Sum(nil)))
}

func webhookMAC(key []byte, id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// CheckWebhookHeaders checks what can be checked of a delivery before its body is read:
// the signature headers are there and its timestamp is within tolerance of now. A
// receiver refuses what fails it without reading a byte of the body.
func CheckWebhookHeaders(header http.Header, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := header.Get(HeaderWebhookID), header.Get(HeaderWebhookTimestamp), header.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingSignature
	}
	seconds, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: not unix seconds", ts)
	}
	if d := now.Sub(time.Unix(seconds, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s from now, tolerance %s", ErrStaleTimestamp, d.Round(time.Second), tolerance)
	}
	return nil
}

// VerifyWebhook checks a delivery's signature and that its timestamp is within tolerance
// of now, either way. The signature header may list several space-separated signatures
// (during a key rotation); one matching v1 signature is enough. Comparison is in
// constant time.
func VerifyWebhook(key []byte, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if err := CheckWebhookHeaders(header, now, tolerance); err != nil {
		return err
	}
	id, ts, sigs := header.Get(HeaderWebhookID), header.Get(HeaderWebhookTimestamp), header.Get(HeaderWebhookSignature)
	want := webhookMAC(key, id, ts, body)
	for _, sig := range strings.Fields(sigs) {
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrBadSignature
}

// ParseWebhookEvent decodes a delivery's body.
func ParseWebhookEvent(body []byte) (WebhookEvent, error) {
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return ev, fmt.Errorf("webhook body: %w", err)
	}
	if ev.ID == "" || ev.Event == "" {
		return ev, errors.New("webhook body: id and event are required")
	}
	return ev, nil
}
