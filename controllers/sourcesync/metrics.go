package sourcesync

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/controllers/syncs"
)

// Metrics count what the source syncs of every kind do.
type Metrics struct {
	fetches  *prometheus.CounterVec
	builds   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	waves    *prometheus.CounterVec
}

// NewMetrics registers the source syncs' metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_source_fetches_total", Help: "Revisions fetched and built by GitSyncs and OCISyncs, and charts rendered by HelmSyncs, by kind and result (ok, error); an unchanged revision or rendering input is never fetched or rendered again.",
		}, []string{"kind", "result"}),
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_source_builds_total", Help: "Bundles built for one or more clusters, by kind and result (ok, error): HelmSync renderings, and GitSync and OCISync bundles with variables substituted (spec.postBuild); clusters whose inputs are equal share one build.",
		}, []string{"kind", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vidra_source_sync_duration_seconds", Help: "Time to sync one GitSync, OCISync or HelmSync, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"kind"}),
		waves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_source_rollout_waves_total", Help: "Waves of GitSync, OCISync and HelmSync progressive rollouts that ended, by result.",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.fetches, m.builds, m.duration, m.waves} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register source sync metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observeFetch(kind string, err error) {
	if m != nil {
		m.fetches.WithLabelValues(kind, result(err)).Inc()
	}
}

func (m *Metrics) observeBuild(kind string, err error) {
	if m != nil {
		m.builds.WithLabelValues(kind, result(err)).Inc()
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// For counts the syncs and waves of one kind.
func (m *Metrics) For(kind string) syncs.Metrics {
	if m == nil {
		return nil
	}
	return kindMetrics{m: m, kind: kind}
}

// kindMetrics count the syncs and waves of one kind.
type kindMetrics struct {
	m    *Metrics
	kind string
}

func (k kindMetrics) ObserveSync(d time.Duration) {
	k.m.duration.WithLabelValues(k.kind).Observe(d.Seconds())
}

func (k kindMetrics) ObserveWave(result string) {
	k.m.waves.WithLabelValues(result).Inc()
}
