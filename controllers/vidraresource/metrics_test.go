package vidraresource

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestManagedObjectsFollowEachVidraResource: vidra_managed_objects sums, per cluster, what
// its VidraResources manage there; one that moves leaves its old cluster, one forgotten
// counts nowhere.
func TestManagedObjectsFollowEachVidraResource(t *testing.T) {
	m := newTestMetrics(t)
	managed := func(cluster string) float64 { return testutil.ToFloat64(m.managed.WithLabelValues(cluster)) }
	m.setManaged("edge-1", "web", 10)
	m.setManaged("edge-1", "db", 5)
	m.setManaged("edge-2", "cache", 3)
	m.setManaged("edge-1", "web", 7)
	if managed("edge-1") != 12 || managed("edge-2") != 3 {
		t.Errorf("edge-1 %v, edge-2 %v, want 12 and 3", managed("edge-1"), managed("edge-2"))
	}
	m.setManaged("edge-2", "web", 7) // its destination changed
	if managed("edge-1") != 5 || managed("edge-2") != 10 {
		t.Errorf("after web moved: edge-1 %v, edge-2 %v, want 5 and 10", managed("edge-1"), managed("edge-2"))
	}
	m.setManaged("edge-2", "web", 0)
	m.setManaged("edge-1", "db", 0)
	if managed("edge-1") != 0 || managed("edge-2") != 3 {
		t.Errorf("after web and db were forgotten: edge-1 %v, edge-2 %v, want 0 and 3", managed("edge-1"), managed("edge-2"))
	}
}

// BenchmarkManagedObjectsInAFleetOfAThousandClusters: recording a reconcile's figure costs
// the same whatever the fleet's size (it was a gauge write per cluster, a quarter of the
// operator's CPU while a thousand clusters received their bundles).
func BenchmarkManagedObjectsInAFleetOfAThousandClusters(b *testing.B) {
	for _, clusters := range []int{10, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", clusters), func(b *testing.B) {
			m := newTestMetrics(b)
			for c := range clusters {
				for v := range 10 {
					m.setManaged(fmt.Sprintf("c%d", c), fmt.Sprintf("c%d-v%d", c, v), 10)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				c := i % clusters
				m.setManaged(fmt.Sprintf("c%d", c), fmt.Sprintf("c%d-v%d", c, i%10), 10)
			}
		})
	}
}
