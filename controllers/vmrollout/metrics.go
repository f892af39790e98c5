package vmrollout

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the VM rollout controller.
type Metrics struct {
	restarts *prometheus.CounterVec
}

// NewMetrics registers the controller's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vidra_vm_restarts_total",
		Help: "VirtualMachine restarts by cluster and result: started, succeeded (back Ready with the new spec), failed (not back within readyTimeout), error (could not be asked for).",
	}, []string{"cluster", "result"})}
	if err := reg.Register(m.restarts); err != nil {
		return nil, fmt.Errorf("register VM rollout metrics: %w", err)
	}
	return m, nil
}

func (m *Metrics) observe(cluster, result string) {
	if m != nil {
		m.restarts.WithLabelValues(cluster, result).Inc()
	}
}
