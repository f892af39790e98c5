package syncs

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// PreviewMetrics count the previews made of refs before they merge, and their time.
type PreviewMetrics struct {
	made     *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewPreviewMetrics registers the previews' metrics with reg.
func NewPreviewMetrics(reg prometheus.Registerer) (*PreviewMetrics, error) {
	m := &PreviewMetrics{
		made: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_previews_total", Help: "Previews of a ref's new revision made, by sync kind and result: ready (no cluster refuses it), refused (a cluster refuses it), failed (not built, or no cluster could dry-run it).",
		}, []string{"kind", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vidra_preview_duration_seconds", Help: "Time to preview one ref's revision on every cluster its sync reaches, by sync kind.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.made, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register preview metrics: %w", err)
		}
	}
	return m, nil
}

// observe counts one preview of kind, which took d.
func (m *PreviewMetrics) observe(kind string, rp vidrav1alpha1.RefPreview, d time.Duration) {
	if m == nil {
		return
	}
	result := "ready"
	switch {
	case rp.Clusters == 0 && rp.Message != "":
		result = "failed"
	case rp.Refused > 0:
		result = "refused"
	}
	m.made.WithLabelValues(kind, result).Inc()
	m.duration.WithLabelValues(kind).Observe(d.Seconds())
}
