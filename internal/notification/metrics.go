package notification

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Why an event meant for a provider was not sent (the dropped metric's reason).
const (
	// DroppedQueueFull: the intake, or the provider's queue, was full.
	DroppedQueueFull = "queue-full"
	// DroppedSendFailed: the receiver refused it, or could not be reached, past the
	// retries.
	DroppedSendFailed = "send-failed"
	// DroppedProviderNotReady: the provider cannot be used as written (its Secret, its
	// address, its type).
	DroppedProviderNotReady = "provider-not-ready"
)

// Metrics count the events sent and dropped, by provider.
type Metrics struct {
	sent, dropped, deduplicated *prometheus.CounterVec
}

// NewMetrics registers the alerts' metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_alerts_sent_total", Help: "Events sent to alert providers, by provider.",
		}, []string{"provider"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_alerts_dropped_total", Help: "Events meant for an alert provider and not sent, by provider (empty when dropped before an Alert was matched) and reason.",
		}, []string{"provider", "reason"}),
		deduplicated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_alerts_deduplicated_total", Help: "Events not sent again to a provider because an equal one was sent within the window, by provider.",
		}, []string{"provider"}),
	}
	for _, c := range []prometheus.Collector{m.sent, m.dropped, m.deduplicated} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register alert metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observeSent(provider string) {
	if m != nil {
		m.sent.WithLabelValues(provider).Inc()
	}
}

func (m *Metrics) observeDropped(provider, reason string) {
	if m != nil {
		m.dropped.WithLabelValues(provider, reason).Inc()
	}
}

func (m *Metrics) observeDeduplicated(provider string) {
	if m != nil {
		m.deduplicated.WithLabelValues(provider).Inc()
	}
}
