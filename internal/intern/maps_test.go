package intern_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/intern"
)

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestMapsKeepOneCopyOfEachMapUpToTheirBound: equal maps decoded apart come back as one
// map, with the table's strings; a map that differs in a key or a value is another;
// past the bound, and for long maps, a map comes back equal, not shared.
func TestMapsKeepOneCopyOfEachMapUpToTheirBound(t *testing.T) {
	strs := intern.NewTable(16)
	table := intern.NewMaps(3, strs)
	decoded := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[strings.Clone(kv[i])] = strings.Clone(kv[i+1])
		}
		return m
	}
	first := table.Map(decoded("sync", "edge", "team", "net"))
	again := table.Map(decoded("team", "net", "sync", "edge"))
	if !sameMap(first, again) || !maps.Equal(first, map[string]string{"sync": "edge", "team": "net"}) {
		t.Errorf("an equal map held twice, or changed: %v, %v", first, again)
	}
	if !sameBytes(first["sync"], strs.String("edge")) {
		t.Error("a held map's value is not the table's string")
	}
	// Keys and values run together differently: "ab"="c" is not "a"="bc".
	other := table.Map(decoded("ab", "c"))
	if sameMap(other, table.Map(decoded("a", "bc"))) || !sameMap(other, table.Map(decoded("ab", "c"))) {
		t.Error(`"ab"="c" and "a"="bc" held as one map, or "ab"="c" not held`)
	}
	if table.Len() != 3 {
		t.Errorf("%d maps held, want the bound of 3", table.Len())
	}
	late, lateAgain := table.Map(decoded("x", "y")), table.Map(decoded("x", "y"))
	if sameMap(late, lateAgain) || !maps.Equal(late, lateAgain) || table.Len() != 3 {
		t.Errorf("a full table took a map (%d held), or changed it: %v", table.Len(), late)
	}
	long := decoded("k", strings.Repeat("v", 2000))
	if got := table.Map(long); !maps.Equal(got, long) {
		t.Errorf("a long map changed: %d entries", len(got))
	}
	if got := table.Map(nil); got != nil {
		t.Errorf("no map came back as %v", got)
	}
}
