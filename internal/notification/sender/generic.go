package sender

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
)

// SignatureHeader carries a generic-hmac body's signature, as Flux's provider of the
// same name sends it: "sha256=" and the hex HMAC-SHA256 of the body.
const SignatureHeader = "X-Signature"

// generic posts the event as Flux's notification-controller does; signed with key when
// there is one.
type generic struct {
	address string
	key     []byte
}

func (g generic) Send(ctx context.Context, client *http.Client, event *eventv1.Event) error {
	body, err := json.Marshal(event)
	if err != nil {
		return fmt.Errorf("encode the event: %w", err)
	}
	var headers map[string]string
	if g.key != nil {
		headers = map[string]string{SignatureHeader: Signature(g.key, body)}
	}
	return post(ctx, client, g.address, body, headers)
}

// Signature is the X-Signature of body signed with key.
func Signature(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
