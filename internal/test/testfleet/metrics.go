package testfleet

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricValue reads the first counter or gauge named name whose labels match labels
// (labels not given match anything) from a registry; -1 when there is none.
func MetricValue(t testing.TB, registry prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
