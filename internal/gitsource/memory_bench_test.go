package gitsource

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/bundle"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// BenchmarkFetchAndBuildPeakHeap fetches a repository of 10 MiB of incompressible
// manifests (100 ConfigMaps of 100 KiB) and builds its bundle, sampling the heap every
// millisecond: the checkout goes to disk, so the heap grows by about the bundle built,
// not by the repository.
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

	var fetchPeak, buildPeak, baseline uint64
	var size int
	for range b.N {
		c := newCache(b, Limits{})
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		baseline = ms.HeapInuse
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
		data, err := bundle.Build(dir, "deploy", bundle.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
		release()
		close(stop)
		wg.Wait()
		buildPeak = max.Load()
	}
	b.ReportMetric(float64(size)/(1<<20), "bundle-MiB")
	b.ReportMetric(float64(fetchPeak-baseline)/(1<<20), "fetch-peak-heap-MiB")
	b.ReportMetric(float64(buildPeak-baseline)/(1<<20), "build-peak-heap-MiB")
}
