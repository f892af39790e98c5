package intern_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/runtime/intern"
)

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func decodedMap(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[strings.Clone(kv[i])] = strings.Clone(kv[i+1])
	}
	return m
}

// TestMapsKeepOneCopyOfEachMap: equal maps decoded apart come back as one map, with the
// table's strings; a map that differs in a key or a value is another; a long map comes
// back equal, not held.
func TestMapsKeepOneCopyOfEachMap(t *testing.T) {
	strs := intern.NewTable(16)
	table := intern.NewMaps(8, strs)
	first := table.Map(decodedMap("sync", "edge", "team", "net"))
	again := table.Map(decodedMap("team", "net", "sync", "edge"))
	if !sameMap(first, again) || !maps.Equal(first, map[string]string{"sync": "edge", "team": "net"}) {
		t.Errorf("an equal map held twice, or changed: %v, %v", first, again)
	}
	if !sameBytes(first["sync"], strs.String("edge")) {
		t.Error("a held map's value is not the table's string")
	}
	// Keys and values run together differently: "ab"="c" is not "a"="bc".
	other := table.Map(decodedMap("ab", "c"))
	if sameMap(other, table.Map(decodedMap("a", "bc"))) || !sameMap(other, table.Map(decodedMap("ab", "c"))) {
		t.Error(`"ab"="c" and "a"="bc" held as one map, or "ab"="c" not held`)
	}
	long := decodedMap("k", strings.Repeat("v", 2000))
	if got := table.Map(long); !sameMap(got, long) || !maps.Equal(got, decodedMap("k", strings.Repeat("v", 2000))) || table.Len() != 3 {
		t.Errorf("a long map held (%d held), or changed", table.Len())
	}
	if got := table.Map(nil); got != nil {
		t.Errorf("no map came back as %v", got)
	}
}

// TestAFullMapsTableStartsAgain: past its bound the table forgets what it holds, so the
// sets met since are shared in their turn; the maps given out before are unchanged.
func TestAFullMapsTableStartsAgain(t *testing.T) {
	table := intern.NewMaps(2, intern.NewTable(16))
	a, b := table.Map(decodedMap("sync", "a")), table.Map(decodedMap("sync", "b"))
	c := table.Map(decodedMap("sync", "c"))
	if table.Len() != 1 || !sameMap(c, table.Map(decodedMap("sync", "c"))) {
		t.Errorf("a full table did not start again with the new set (%d held)", table.Len())
	}
	if aAgain := table.Map(decodedMap("sync", "a")); sameMap(a, aAgain) || !maps.Equal(a, aAgain) || !maps.Equal(b, decodedMap("sync", "b")) {
		t.Errorf("a set forgotten came back as the map given out before, or a map given out changed: %v, %v", a, b)
	}
}
