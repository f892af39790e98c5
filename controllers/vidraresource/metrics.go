package vidraresource

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/internal/engine/apply"
)

// Metrics of the VidraResource controller.
type Metrics struct {
	applies  *prometheus.CounterVec
	managed  *prometheus.GaugeVec
	duration prometheus.Histogram
	drift    *prometheus.CounterVec

	mu sync.Mutex
	// managedBy[vidraresource] is where it manages how many objects; managedOn[cluster]
	// their sum there. A reconcile changes the figures of its VidraResource's cluster
	// alone, and of the cluster it moved from: it costs the same with a thousand clusters
	// as with one.
	managedBy map[string]managedCount
	managedOn map[string]int
}

type managedCount struct {
	cluster string
	objects int
}

// NewMetrics registers the controller's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_apply_total", Help: "Objects applied, by destination cluster and result.",
		}, []string{"cluster", "result"}),
		managed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vidra_managed_objects", Help: "Objects managed on each destination cluster (an object shared by several VidraResources counts for each).",
		}, []string{"cluster"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vidra_reconcile_duration_seconds", Help: "Time to reconcile one VidraResource.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_drift_repaired_total", Help: "Objects set back after another field manager changed them, by destination cluster.",
		}, []string{"cluster"}),
		managedBy: map[string]managedCount{},
		managedOn: map[string]int{},
	}
	for _, c := range []prometheus.Collector{m.applies, m.managed, m.duration, m.drift} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register VidraResource metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observeApply(cluster string, results []apply.Result) {
	if m == nil {
		return
	}
	for _, r := range results {
		m.applies.WithLabelValues(cluster, string(r.Action)).Inc()
		if r.Action == apply.Repaired {
			m.drift.WithLabelValues(cluster).Inc()
		}
	}
}

// setManaged records how many objects a VidraResource manages on a cluster (0 to forget).
func (m *Metrics) setManaged(cluster, vr string, count int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if was, ok := m.managedBy[vr]; ok {
		m.managedOn[was.cluster] -= was.objects
		if was.cluster != cluster {
			m.managed.WithLabelValues(was.cluster).Set(float64(m.managedOn[was.cluster]))
		}
	}
	if count == 0 {
		delete(m.managedBy, vr)
	} else {
		m.managedBy[vr] = managedCount{cluster: cluster, objects: count}
	}
	m.managedOn[cluster] += count
	m.managed.WithLabelValues(cluster).Set(float64(m.managedOn[cluster]))
}
