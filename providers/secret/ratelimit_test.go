package secret

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// Without --cluster-qps a cluster gets no client-side limit (its API Priority and
// Fairness paces the operator); with it, one token bucket per cluster, of that rate.
func TestAClusterIsRateLimitedOnlyWhenAskedAndByOneBucket(t *testing.T) {
	unlimited := Options{Namespace: "vidra-system", Scheme: runtime.NewScheme()}
	if err := unlimited.defaults(); err != nil {
		t.Fatal(err)
	}
	if l := unlimited.RateLimiter("edge-1"); l != nil {
		t.Fatalf("with no QPS, a cluster's limiter is %T at %v a second", l, l.QPS())
	}

	// A token every 100s: none comes back while the test runs.
	limited := Options{Namespace: "vidra-system", Scheme: runtime.NewScheme(), QPS: 0.01, Burst: 40}
	if err := limited.defaults(); err != nil {
		t.Fatal(err)
	}
	a, b := limited.RateLimiter("edge-1"), limited.RateLimiter("edge-2")
	if a == nil || a.QPS() != 0.01 {
		t.Fatalf("with QPS 0.01, a cluster's limiter is %v", a)
	}
	if a == b {
		t.Fatal("two clusters share one limiter: one busy cluster would slow the other")
	}
	for range 40 {
		if !a.TryAccept() {
			t.Fatal("the burst of 40 was not allowed at once")
		}
	}
	if a.TryAccept() {
		t.Fatal("a request beyond the burst was let through at once")
	}
}
