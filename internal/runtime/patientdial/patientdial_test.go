package patientdial_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/runtime/patientdial"
)

// closedAddress is a loopback address that refuses connections: its listener is closed.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func dialer(patience time.Duration) *patientdial.Dialer {
	d := patientdial.New()
	d.Patience, d.Retry = patience, 20*time.Millisecond
	return d
}

// TestADialWaitsForAnAddressThatListensAgain: refused at first, the dial returns the
// connection once the address listens again, as a restarted API server does.
func TestADialWaitsForAnAddressThatListensAgain(t *testing.T) {
	addr := closedAddress(t)
	listening := make(chan net.Listener, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen on %s again: %v", addr, err)
			close(listening)
			return
		}
		listening <- l
	}()
	conn, err := dialer(time.Minute).DialContext(context.Background(), "tcp", addr)
	l := <-listening
	if l != nil {
		defer func() { _ = l.Close() }()
	}
	if err != nil {
		t.Fatalf("dial %s: %v, want the connection once it listens again", addr, err)
	}
	_ = conn.Close()
}

// TestADialGivesUpAfterItsPatienceOrItsContext: an address that keeps refusing fails
// the dial with the refusal once the patience is spent, and fails it once the context
// ends.
func TestADialGivesUpAfterItsPatienceOrItsContext(t *testing.T) {
	addr := closedAddress(t)
	if _, err := dialer(200*time.Millisecond).DialContext(context.Background(), "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after the patience: %v, want connection refused", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := dialer(time.Hour).DialContext(ctx, "tcp", addr)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("dial after the context ended: connected to an address that refuses")
		}
	case <-time.After(time.Minute):
		t.Fatal("the dial outlived its context by a minute")
	}
}
