// Package alertreceiver is a receiver of Vidra's alerts on loopback, as a generic or
// generic-hmac webhook: it checks each body's signature, decodes Flux's event format,
// and keeps what it received.
package alertreceiver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"

	"github.com/vidra-operator/vidra/internal/notification/sender"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// Answer is what the receiver answers its n-th request (from 1), after delay.
type Answer func(n int) (code int, delay time.Duration)

// Receiver is an HTTP server on loopback.
type Receiver struct {
	*httptest.Server
	key    string
	answer Answer

	mu     sync.Mutex
	calls  int
	events []eventv1.Event
	bad    []string
}

// New starts a receiver that checks signatures made with key ("" for none: generic),
// answering as answer says (nil: 200 at once), until the test ends.
func New(t testing.TB, key string, answer Answer) *Receiver {
	t.Helper()
	r := &Receiver{key: key, answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.calls++
	n := r.calls
	if r.key != "" && req.Header.Get(sender.SignatureHeader) != sender.Signature([]byte(r.key), body) {
		r.bad = append(r.bad, "bad signature "+req.Header.Get(sender.SignatureHeader))
	}
	r.mu.Unlock()
	code, delay := http.StatusOK, time.Duration(0)
	if r.answer != nil {
		code, delay = r.answer(n)
	}
	time.Sleep(delay)
	if code == http.StatusOK {
		var ev eventv1.Event
		err := json.Unmarshal(body, &ev)
		r.mu.Lock()
		if err != nil {
			r.bad = append(r.bad, err.Error())
		}
		r.events = append(r.events, ev)
		r.mu.Unlock()
	}
	w.WriteHeader(code)
}

// Events are the events received (answered 200), in order.
func (r *Receiver) Events() []eventv1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]eventv1.Event(nil), r.events...)
}

// Reasons are the events' reasons, in order.
func (r *Receiver) Reasons() []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Reason)
	}
	return out
}

// WaitFor waits until an event that match accepts was received, and returns it; it
// fails the test on a body that was not signed or not an event.
func (r *Receiver) WaitFor(t testing.TB, what string, match func(eventv1.Event) bool) eventv1.Event {
	t.Helper()
	var found eventv1.Event
	testfleet.Eventually(t, 60*time.Second, "alert received: "+what, func() (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.bad) > 0 {
			return false, fmt.Errorf("the receiver found: %v", r.bad)
		}
		for _, e := range r.events {
			if match(e) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// Count is how many events received match accepts.
func (r *Receiver) Count(match func(eventv1.Event) bool) int {
	n := 0
	for _, e := range r.Events() {
		if match(e) {
			n++
		}
	}
	return n
}

// Reason matches the events of reason about the object named name.
func Reason(reason, name string) func(eventv1.Event) bool {
	return func(e eventv1.Event) bool { return e.Reason == reason && e.InvolvedObject.Name == name }
}
