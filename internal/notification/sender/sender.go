// Package sender posts one event to one kind of receiver: a generic webhook (signed or
// not), Slack, Microsoft Teams. Each request is one attempt; the dispatcher retries. A
// receiver's address may itself be a credential (a Slack webhook's path), so no error
// names more of it than its scheme and host.
package sender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Config is an AlertProvider resolved: its type, the address and token it sends with.
type Config struct {
	Type     string
	Address  string
	Token    string
	Channel  string
	Username string
}

// Sender sends one event.
type Sender interface {
	Send(ctx context.Context, client *http.Client, event *eventv1.Event) error
}

// New is the sender of c's type; its errors say why c cannot be used.
func New(c Config) (Sender, error) {
	u, err := url.Parse(c.Address)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("the address is not an https:// or http:// URL")
	}
	switch c.Type {
	case vidrav1alpha1.AlertProviderGeneric:
		return generic{address: c.Address}, nil
	case vidrav1alpha1.AlertProviderGenericHMAC:
		if c.Token == "" {
			return nil, errors.New("type generic-hmac signs with the Secret's token, and there is none")
		}
		return generic{address: c.Address, key: []byte(c.Token)}, nil
	case vidrav1alpha1.AlertProviderSlack:
		return slack{address: c.Address, channel: c.Channel, username: c.Username}, nil
	case vidrav1alpha1.AlertProviderMSTeams:
		return msteams{address: c.Address}, nil
	case vidrav1alpha1.AlertProviderGitHub, vidrav1alpha1.AlertProviderGitLab, vidrav1alpha1.AlertProviderGitea:
		return newCommitStatus(c, u)
	}
	return nil, fmt.Errorf("unknown type %q", c.Type)
}

// StatusError is a receiver's answer that is not a success.
type StatusError struct {
	Host string
	Code int
	// Answer is the start of what the receiver said, for the error's message.
	Answer string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s answered %d %s", e.Host, e.Code, http.StatusText(e.Code))
	if e.Answer != "" {
		msg += ": " + e.Answer
	}
	return msg
}

// shownAnswer bounds what an error repeats of a receiver's answer.
const shownAnswer = 200

// Retryable says whether err may pass if the request is sent again: a failure to reach
// the receiver, or its answer that it could not take it now (5xx, 429). A 4xx is the
// request's fault, and repeats.
func Retryable(err error) bool {
	var status *StatusError
	if errors.As(err, &status) {
		return status.Code >= 500 || status.Code == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled)
}

// maxAnswer bounds what is read of a receiver's answer: it is only drained.
const maxAnswer = 64 << 10

// post posts body as JSON to address, with headers; its errors name the address's
// scheme and host alone.
func post(ctx context.Context, client *http.Client, address string, body []byte, headers map[string]string) error {
	host, ok := Origin(address)
	if !ok {
		return errors.New("the address is not a URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, address, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("request to %s: %s", host, redact(err, address, host))
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post to %s: %s", host, redact(err, address, host))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		shown := strings.ToValidUTF8(strings.TrimSpace(string(answer[:min(len(answer), shownAnswer)])), "")
		return &StatusError{Host: host, Code: resp.StatusCode, Answer: shown}
	}
	return nil
}

// Origin is the scheme and host of address (https://hooks.slack.com), what may be shown
// of an address that may carry a token in its path or query; false when it has no host.
func Origin(address string) (string, bool) {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return "", false
	}
	return u.Scheme + "://" + u.Host, true
}

// redact is err's message with the address (which url.Error repeats) cut to host.
func redact(err error, address, host string) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return strings.ReplaceAll(err.Error(), address, host)
}
