package gitsource

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/bundle"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// BenchmarkFetchAndBuildPeakHeap fetches a repository of 10 MiB of incompressible
// manifests (100 ConfigMaps of 100 KiB) and builds its bundle, sampling the heap every
// millisecond: the checkout goes to disk, so the heap grows by about the bundle built,
// not by the repository. The process's peak RSS (the kernel's VmHWM, reset before the
// fetch) is reported beside it: it includes the test binary's own, shown as the baseline.
func BenchmarkFetchAndBuildPeakHeap(b *testing.B) {
	srv := gitserver.New(b)
	repo := srv.Repo(b, "large")
	files := map[string]string{}
	for i := range 100 {
		data := make([]byte, 75<<10) // 100 KiB once in base64
		if _, err := rand.Read(data); err != nil {
			b.Fatal(err)
		}
		files[fmt.Sprintf("deploy/cm-%03d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\ndata:\n  blob: %s\n", i, base64.StdEncoding.EncodeToString(data))
	}
	commit := repo.Commit(b, "main", files, "large")
	files = nil //nolint:ineffassign,wastedassign // let the collector take the fixture before measuring

	var fetchPeak, buildPeak, baseline, rssBaseline, rssFetch, rssBuild uint64
	var size int
	for range b.N {
		c := newCache(b, Limits{})
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		baseline = ms.HeapInuse
		resetPeakRSS(b)
		rssBaseline = procStatusKiB(b, "VmHWM")
		var max atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			var s runtime.MemStats
			for {
				runtime.ReadMemStats(&s)
				if s.HeapInuse > max.Load() {
					max.Store(s.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		})
		dir, release, err := c.Checkout(b.Context(), Remote{URL: repo.URL(), InsecureHTTP: true}, Revision{Ref: "main", Commit: commit})
		if err != nil {
			b.Fatal(err)
		}
		fetchPeak = max.Swap(0)
		rssFetch = procStatusKiB(b, "VmHWM")
		data, err := bundle.Build(dir, "deploy", bundle.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
		release()
		close(stop)
		wg.Wait()
		buildPeak = max.Load()
		rssBuild = procStatusKiB(b, "VmHWM")
	}
	b.ReportMetric(float64(size)/(1<<20), "bundle-MiB")
	b.ReportMetric(float64(fetchPeak-baseline)/(1<<20), "fetch-peak-heap-MiB")
	b.ReportMetric(float64(buildPeak-baseline)/(1<<20), "build-peak-heap-MiB")
	b.ReportMetric(float64(rssBaseline)/(1<<10), "baseline-RSS-MiB")
	b.ReportMetric(float64(rssFetch)/(1<<10), "fetch-peak-RSS-MiB")
	b.ReportMetric(float64(rssBuild)/(1<<10), "build-peak-RSS-MiB")
}

// resetPeakRSS has the kernel count the process's peak RSS (VmHWM) from now on.
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("peak RSS cannot be reset here: %v", err)
	}
}

// procStatusKiB is a field of /proc/self/status, in KiB ("VmHWM:   123 kB").
func procStatusKiB(b *testing.B, field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("%s: %v", field, err)
			}
			return kib
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
