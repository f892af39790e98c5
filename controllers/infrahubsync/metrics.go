package infrahubsync

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// Metrics of the InfrahubSyncs' syncs and of their reading of Infrahub.
type Metrics struct {
	requests  *prometheus.CounterVec
	downloads *prometheus.CounterVec
	duration  prometheus.Histogram
	waves     *prometheus.CounterVec
}

// NewMetrics registers the controller's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_infrahub_requests_total", Help: "Requests to Infrahub, by HTTP status code (\"error\" when no answer came).",
		}, []string{"code"}),
		downloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_artifact_downloads_total", Help: "Artifact contents downloaded from Infrahub, by result (ok, checksum_mismatch, error).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vidra_sync_duration_seconds", Help: "Time to sync one InfrahubSync.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		waves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_rollout_waves_total", Help: "Waves of progressive rollouts that ended, by result (completed, failed, rolledback).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.downloads, m.duration, m.waves} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register InfrahubSync metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observeRequest(code string) {
	if m != nil {
		m.requests.WithLabelValues(code).Inc()
	}
}

func (m *Metrics) observeDownload(err error) {
	if m == nil {
		return
	}
	var mismatch *infrahub.ChecksumMismatchError
	switch {
	case err == nil:
		m.downloads.WithLabelValues("ok").Inc()
	case errors.As(err, &mismatch):
		m.downloads.WithLabelValues("checksum_mismatch").Inc()
	default:
		m.downloads.WithLabelValues("error").Inc()
	}
}

// ObserveSync counts one InfrahubSync's sync and how long it took.
func (m *Metrics) ObserveSync(d time.Duration) { m.duration.Observe(d.Seconds()) }

// ObserveWave counts a wave of an InfrahubSync's rollout that ended, by result.
func (m *Metrics) ObserveWave(result string) { m.waves.WithLabelValues(result).Inc() }

// Syncs are the metrics of InfrahubSyncs' syncs (nil when there are none).
func (m *Metrics) Syncs() syncs.Metrics {
	if m == nil {
		return nil
	}
	return m
}
