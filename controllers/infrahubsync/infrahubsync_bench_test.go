package infrahubsync_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// BenchmarkWebhookToApplied measures the time from Infrahub delivering a signed artifact
// event to the changed object being on the member, as kubectl there would show it, over
// 20 changes per iteration (run it with -benchtime=1x). The sync's interval is an hour,
// so only the webhook can bring the change.
func BenchmarkWebhookToApplied(b *testing.B) {
	const samples = 20
	member := fleet.Members[0]
	s := newInfrahub(b, "bench", infrahubtest.Options{})
	const ns = "ihs-bench"
	putSites(s, "main", ns, "v0", "paris")
	newSync(b, "bench", "bench", s, withCluster(member.Name))
	allReady(b, "bench", 1)
	waitValue(b, member, ns, "paris", "v0")
	url := newReceiver(b, nil)

	var latencies []time.Duration
	for n := range b.N {
		for i := range samples {
			value := fmt.Sprintf("v%d-%d", n, i+1)
			putSites(s, "main", ns, value, "paris")
			start := time.Now()
			if code := deliver(b, url, webhookKey, start, event(fmt.Sprintf("bench-%d-%d", n, i), "main", "web-definition", "web-paris")); code != 202 {
				b.Fatalf("webhook: HTTP %d", code)
			}
			testfleet.Poll(b, 5*time.Millisecond, 30*time.Second, "ConfigMap at "+value, func() (bool, error) {
				return configMapValue(b, member, ns, "paris") == value, nil
			})
			latencies = append(latencies, time.Since(start))
		}
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*95/100].Microseconds())/1000, "p95-ms")
}
