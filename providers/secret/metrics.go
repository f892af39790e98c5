package secret

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the provider, registered once per Provider.
type metrics struct {
	ready    *prometheus.GaugeVec
	engaged  prometheus.Counter
	rejected *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vidra_cluster_ready",
			Help: "1 when the enrolled cluster is engaged and answers its probes, 0 when engaged but unreachable.",
		}, []string{"cluster"}),
		engaged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vidra_cluster_engaged_total",
			Help: "Clusters engaged (first enrollment or kubeconfig rotation).",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_cluster_rejected_total",
			Help: "Enrollment Secrets rejected, by reason.",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.ready, m.engaged, m.rejected} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register cluster provider metrics: %w", err)
		}
	}
	return m, nil
}
