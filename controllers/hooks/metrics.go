package hooks

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count the notifications received.
type Metrics struct {
	deliveries *prometheus.CounterVec
}

// NewMetrics registers the receiver's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_webhook_deliveries_total", Help: "Webhook deliveries received (Infrahub's, and Git pushes), by result.",
		}, []string{"result"}),
	}
	if err := reg.Register(m.deliveries); err != nil {
		return nil, fmt.Errorf("register webhook metrics: %w", err)
	}
	return m, nil
}

func (m *Metrics) observe(result string) {
	if m != nil {
		m.deliveries.WithLabelValues(result).Inc()
	}
}
