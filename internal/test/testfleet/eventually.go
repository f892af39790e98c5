package testfleet

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Eventually polls cond every 100ms until it holds, and fails the test when timeout passes
// first, naming what was awaited and the last error cond returned.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	Poll(t, 100*time.Millisecond, timeout, what, cond)
}

// Poll is Eventually with a chosen interval, for benchmarks that time what they await.
func Poll(t testing.TB, every, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := WaitFor(context.Background(), every, timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// WaitFor polls cond every interval until it holds; it fails when timeout passes first,
// naming what was awaited and the last error cond returned, or when ctx ends. It serves
// programs that run a fleet outside a test (the bench, the demo).
func WaitFor(ctx context.Context, every, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s: not true after %v (last error: %w)", what, timeout, err)
			}
			return fmt.Errorf("%s: not true after %v (last error: <nil>)", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(every):
		}
	}
}
