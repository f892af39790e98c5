package secret_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// BenchmarkEnroll measures the time from creating a labeled kubeconfig Secret to its
// VidraCluster showing Engaged, as a user watching `kubectl get vidraclusters` sees it,
// over 20 enrollments per iteration (run it with -benchtime=1x).
func BenchmarkEnroll(b *testing.B) {
	const samples = 20
	member := fleet.Members[2]
	// One enrollment first, unmeasured: the manager's own start-up is not enrollment.
	retireSecret(b, enrollAndWait(b, "bench-warmup", member.Kubeconfig))
	var latencies []time.Duration
	for n := range b.N {
		for i := range samples {
			start := time.Now()
			s := enrollAndWait(b, fmt.Sprintf("bench-enroll-%d-%d", n, i), member.Kubeconfig)
			latencies = append(latencies, time.Since(start))
			retireSecret(b, s)
		}
	}
	slices.Sort(latencies)
	b.ReportMetric(ms(latencies[len(latencies)/2]), "p50-ms")
	b.ReportMetric(ms(latencies[len(latencies)*95/100]), "p95-ms")
}

// enrollAndWait enrolls a cluster named like its Secret and waits until its
// VidraCluster shows Engaged.
func enrollAndWait(b *testing.B, name string, kubeconfig []byte) *corev1.Secret {
	b.Helper()
	s := enroll(b, name, name, kubeconfig, nil)
	waitEngaged(b, name)
	return s
}

// waitEngaged polls the VidraCluster every 10ms until it shows Engaged.
func waitEngaged(b *testing.B, name string) {
	b.Helper()
	testfleet.Poll(b, 10*time.Millisecond, 60*time.Second, name+" Engaged", func() (bool, error) {
		vc := &vidrav1alpha1.VidraCluster{}
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vc)
		return err == nil && vc.Status.Phase == vidrav1alpha1.ClusterEngaged, nil
	})
}

// BenchmarkIdleClusterMemory measures what one engaged, idle cluster costs the operator:
// resident memory, Go heap and goroutines, from enrolling eight more members at once.
func BenchmarkIdleClusterMemory(b *testing.B) {
	const members = 8
	ctx := context.Background()
	extra, err := testfleet.Start(ctx, testfleet.Options{Members: members})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = extra.Stop() }()
	for range b.N {
		rssBefore, heapBefore := memory()
		goroutinesBefore := runtime.NumGoroutine()
		var secrets []*corev1.Secret
		for i, m := range extra.Members {
			secrets = append(secrets, enroll(b, fmt.Sprintf("bench-idle-%d", i), fmt.Sprintf("bench-idle-%d", i), m.Kubeconfig, nil))
		}
		for _, s := range secrets {
			waitEngaged(b, s.Name)
		}
		time.Sleep(5 * time.Second) // let the engaged caches settle to idle
		rssAfter, heapAfter := memory()
		goroutinesAfter := runtime.NumGoroutine()
		b.ReportMetric(float64(rssAfter-rssBefore)/members/(1<<20), "RSS-MiB/cluster")
		b.ReportMetric(float64(heapAfter-heapBefore)/members/(1<<20), "heap-MiB/cluster")
		b.ReportMetric(float64(goroutinesAfter-goroutinesBefore)/members, "goroutines/cluster")
		for _, s := range secrets {
			retireSecret(b, s)
		}
	}
}

// memory returns the process's resident set and the Go heap in use, after a GC.
func memory() (rss, heap uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				kb, _ := strconv.ParseUint(strings.Fields(line)[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return rss, ms.HeapInuse
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
