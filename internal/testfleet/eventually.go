package testfleet

import (
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
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v (last error: %v)", what, timeout, lastErr)
		}
		time.Sleep(every)
	}
}
