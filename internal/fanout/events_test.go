package fanout_test

import (
	"fmt"
	"strings"
	"testing"
)

// lines splits drain's Events, one per line.
func lines(h *harness) []string {
	if all := drain(h); all != "" {
		return strings.Split(all, "\n")
	}
	return nil
}

// count counts the Events that start with prefix.
func count(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// TestManyItemsChangingAtOnceCostFewEvents: a delivery records an Event for each of its
// first ten items delivered or changed, then one Event per reason naming how many more
// and the first of them, not one hub write for each of a thousand artifacts.
func TestManyItemsChangingAtOnceCostFewEvents(t *testing.T) {
	sel := map[string]string{"suite": "many-events"}
	enroll(t, "many-events-1", sel)
	bundles := map[string]string{}
	var ids []string
	for i := range 25 {
		id := fmt.Sprintf("item-%02d", i)
		bundles[id], ids = configMap(id, "1"), append(ids, id)
	}
	src := newSource(bundles)
	h := newHarness(t, "many-events", selecting(sel), src)

	h.round(src.items(ids...))
	events := lines(h)
	if len(events) != 11 || count(events, "Normal BundleAdded bundle item-") != 10 || count(events, "Normal BundleAdded 15 more bundles delivered: item-10, item-11") != 1 {
		t.Errorf("25 new items recorded %d Events, want 10 one by one and one naming the 15 more:\n%s", len(events), strings.Join(events, "\n"))
	}
	if !strings.Contains(strings.Join(events, "\n"), "item-19 and 5 others") {
		t.Errorf("the summing-up Event names more than ten items, or not the first ten of them:\n%s", strings.Join(events, "\n"))
	}

	for _, id := range ids[:12] {
		src.set(id, configMap(id, "2"), nil)
	}
	h.round(src.items(ids...))
	events = lines(h)
	if len(events) != 11 || count(events, "Normal BundleUpdated bundle item-") != 10 || count(events, "Normal BundleUpdated 2 more bundles changed and updated: item-10, item-11") != 1 {
		t.Errorf("12 changed items recorded %d Events, want 10 one by one and one naming the 2 more:\n%s", len(events), strings.Join(events, "\n"))
	}

	h.round(src.items(ids...))
	if events = lines(h); len(events) != 0 {
		t.Errorf("an unchanged delivery recorded Events: %v", events)
	}
}
