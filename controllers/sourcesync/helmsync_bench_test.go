package sourcesync_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// BenchmarkHelmChartVersionToReady: a new chart version in a Helm repository, and a sync
// requested (as a CI job annotating the HelmSync would), to the version rendered for and
// applied on every member, and the sync Ready. Each sample waits out the few seconds
// within which a repository's index is not asked again. The members serve the same
// version and APIs, and the values name no cluster: one render serves both, and
// renders/version counts the charts rendered per version for the whole fleet.
func BenchmarkHelmChartVersionToReady(b *testing.B) {
	const ns, samples = "bench-helm", 10
	noWidget := map[string]string{"templates/widget.yaml": ""}
	repo := helmrepo.NewRepo(b)
	repo.Add(helmrepo.ChartWith(b, helmrepo.CapsChart, "1.0.0", noWidget))
	hs := helmSync("bench-helm", repo.URL(), helmrepo.CapsChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Destination = everyMember(ns)
		hs.Spec.Values = values(`{"cluster": "fleet"}`)
		hs.Spec.Interval = &metav1.Duration{Duration: time.Hour}
	})
	create(b, hs)
	readyAt(b, hs, "1.0.0")
	indexBodies, archives := repo.IndexBodies(), repo.ArchiveGets()
	renders := func() float64 {
		return testfleet.MetricValue(b, registry, "vidra_source_fetches_total", map[string]string{"kind": "HelmSync", "result": "ok"})
	}
	rendered := renders()

	var latencies []time.Duration
	versions := 0
	for n := range b.N {
		for i := range samples {
			time.Sleep(5100 * time.Millisecond)
			version := fmt.Sprintf("1.%d.%d", n+1, i+1)
			files := map[string]string{"templates/widget.yaml": "", "values.yaml": fmt.Sprintf("greeting: %q\ncluster: \"\"\n", version)}
			repo.Add(helmrepo.ChartWith(b, helmrepo.CapsChart, version, files))
			start := time.Now()
			requestSync(b, hs)
			for _, m := range fleet.Members {
				testfleet.Poll(b, 5*time.Millisecond, 60*time.Second, "version "+version+" on "+m.Name, func() (bool, error) {
					return dataOf(b, m, ns, "bench-helm-caps", "greeting") == version, nil
				})
			}
			readyAt(b, hs, version)
			latencies = append(latencies, time.Since(start))
			versions++
		}
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*9/10].Microseconds())/1000, "p90-ms")
	b.ReportMetric(float64(repo.ArchiveGets()-archives)/float64(versions), "downloads/version")
	b.ReportMetric(float64(repo.IndexBodies()-indexBodies)/float64(versions), "index-bodies/version")
	b.ReportMetric((renders()-rendered)/float64(versions), "renders/version")
}
