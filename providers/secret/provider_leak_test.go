package secret_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// upstreamEngageLeak marks the goroutine multicluster-runtime v0.24.1 starts for every
// source of every controller each time a cluster is engaged, and which waits for the
// controller to stop rather than for the cluster to go (pkg/controller, startWithinContext).
// It is counted apart, so that any leak of Vidra's own fails the test.
const upstreamEngageLeak = "multicluster-runtime@v0.24.1/pkg/controller/controller.go:204"

// goroutines returns the number of goroutines, and how many of them are the upstream
// engage leak, once the total has stopped falling, so work winding down is not counted.
func goroutines() (total, upstream int) {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			break
		}
		n = m
	}
	buf := make([]byte, 8<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return n, strings.Count(stacks, upstreamEngageLeak)
}

// TestEngageDisengageCyclesLeakNoGoroutines: enrolling and retiring a cluster 100 times
// leaves no goroutine behind — its cache, informers, probe loop, connections and every
// controller's watches on it all stop.
func TestEngageDisengageCyclesLeakNoGoroutines(t *testing.T) {
	const cycles = 100
	member := fleet.Members[2]
	cycle := func() {
		s := enroll(t, "leak-kubeconfig", "leak", member.Kubeconfig, nil)
		testfleet.Eventually(t, 15*time.Second, "leak engaged", func() (bool, error) {
			_, err := provider.Get(context.Background(), multicluster.ClusterName("leak"))
			return err == nil, nil
		})
		retireSecret(t, s)
	}
	cycle() // warm up: first-use allocations are not leaks
	before, upstreamBefore := goroutines()
	for range cycles {
		cycle()
	}
	var after, upstreamAfter int
	testfleet.Eventually(t, 30*time.Second, "goroutines back to the baseline", func() (bool, error) {
		after, upstreamAfter = goroutines()
		return after-upstreamAfter <= before-upstreamBefore+5,
			fmt.Errorf("%d goroutines (%d upstream) against %d (%d upstream) before", after, upstreamAfter, before, upstreamBefore)
	})
	t.Logf("goroutines: %d before, %d after %d engage/disengage cycles, of which %d and %d are multicluster-runtime's engage leak",
		before, after, cycles, upstreamBefore, upstreamAfter)
}
