package notification

import (
	"context"
	"errors"
	"strings"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/notification/sender"
)

// Secret keys an AlertProvider's Secret holds.
const (
	// TokenKey is the HMAC key, or a Git host's API token.
	TokenKey = "token"
	// AddressKey, when set, is the receiver's URL, in place of spec.address.
	AddressKey = "address"
)

// Resolve is the sender of provider: its Secret read through gate, for whoever last
// changed the provider, and only for an address the Secret's allowed-urls cover. Its
// errors are a *credentials.Refusal where the provider cannot use the Secret as written.
func Resolve(ctx context.Context, gate *credentials.Gate, provider *vidrav1alpha1.AlertProvider) (sender.Sender, error) {
	cfg := sender.Config{
		Type:     provider.Spec.Type,
		Address:  provider.Spec.Address,
		Channel:  provider.Spec.Channel,
		Username: provider.Spec.Username,
	}
	if ref := provider.Spec.SecretRef; ref != nil {
		if gate == nil {
			return nil, errors.New("this operator reads no Secret for alert providers")
		}
		use := credentials.Use{
			Sync:   "AlertProvider " + provider.Name,
			Field:  "spec.secretRef",
			Secret: vidrav1alpha1.SecretReference{Namespace: gate.Namespace(), Name: ref.Name},
		}
		if who, ok := policy.RequesterOf(provider.Annotations); ok {
			use.Requester = &who
		}
		secret, err := gate.GetRendered(ctx, use)
		if err != nil {
			return nil, err
		}
		secretAddress := string(secret.Data[AddressKey])
		if secretAddress != "" {
			cfg.Address = secretAddress
		}
		use.URL = cfg.Address
		if err := gate.Admit(ctx, use, secret); err != nil {
			return nil, hideAddress(err, secretAddress)
		}
		cfg.Token = string(secret.Data[TokenKey])
	}
	return sender.New(cfg)
}

// hideAddress is err without the address a Secret holds (a Slack or Teams webhook's
// URL is a credential): its scheme and host alone.
func hideAddress(err error, address string) error {
	var refusal *credentials.Refusal
	if address == "" || !errors.As(err, &refusal) {
		return err
	}
	shown := "the address the Secret holds"
	if origin, ok := sender.Origin(address); ok {
		shown = origin + "/..."
	}
	hidden := *refusal
	hidden.Message = strings.ReplaceAll(refusal.Message, address, shown)
	return &hidden
}
