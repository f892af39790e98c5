package intern_test

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/vidra-operator/vidra/internal/runtime/intern"
)

func sameBytes(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestATableKeepsOneCopyOfEachShortStringUpToItsBound: equal strings come back as one
// copy; past the bound, and for long strings, they come back as they were given.
func TestATableKeepsOneCopyOfEachShortStringUpToItsBound(t *testing.T) {
	table := intern.NewTable(2)
	first := table.String(strings.Clone("ConfigMap"))
	if again := table.String(strings.Clone("ConfigMap")); again != "ConfigMap" || !sameBytes(first, again) {
		t.Errorf("ConfigMap interned twice: %q, %q", first, again)
	}
	table.String(strings.Clone("v1"))
	late := strings.Clone("Secret")
	if got := table.String(late); !sameBytes(got, late) || table.Len() != 2 {
		t.Errorf("a full table took Secret (%d held)", table.Len())
	}
	long := strings.Repeat("x", 65)
	if got := table.String(long); !sameBytes(got, long) || table.Len() != 2 {
		t.Errorf("a table took a long string (%d held)", table.Len())
	}
}
