package helmsource

import "testing"

// The loaded-chart and index caches are bounded by count: what one entry may cost times
// the count must stay within what the operator can spare.
func TestCachedChartsAndIndexesStayWithinTheirMemoryBudget(t *testing.T) {
	l := Limits{}.withDefaults()
	if worst := chartCacheEntries * l.MaxExpandedBytes; worst > 256<<20 {
		t.Errorf("the chart cache may hold %d MiB, want at most 256 MiB", worst>>20)
	}
	if worst := indexCacheEntries * l.MaxIndexBytes; worst > 512<<20 {
		t.Errorf("the index cache may hold %d MiB of indexes, want at most 512 MiB", worst>>20)
	}
}
