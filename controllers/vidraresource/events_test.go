package vidraresource

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestJoinNotesFitsAnEvent(t *testing.T) {
	if got := joinNotes([]string{"ConfigMap a/b"}); got != "ConfigMap a/b" {
		t.Errorf("one note = %q", got)
	}
	if got := joinNotes([]string{"ConfigMap a/b", "ConfigMap a/c"}); got != "ConfigMap a/b; ConfigMap a/c" {
		t.Errorf("two notes = %q", got)
	}
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("ConfigMap namespace/object-%d", i))
	}
	got := joinNotes(many)
	if len(got) > maxNote || !strings.HasPrefix(got, "ConfigMap namespace/object-0; ") || !strings.Contains(got, " more") {
		t.Errorf("100 notes = %q (%d bytes)", got, len(got))
	}
	long := joinNotes([]string{strings.Repeat("é", maxNote), "next"})
	if len(long) > maxNote || !utf8.ValidString(long) {
		t.Errorf("a note too long alone is cut to %d bytes, valid UTF-8 %v", len(long), utf8.ValidString(long))
	}
}
