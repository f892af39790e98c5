package events

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestJoinFitsAnEvent(t *testing.T) {
	if got := Join([]string{"ConfigMap a/b"}); got != "ConfigMap a/b" {
		t.Errorf("one note = %q", got)
	}
	if got := Join([]string{"ConfigMap a/b", "ConfigMap a/c"}); got != "ConfigMap a/b; ConfigMap a/c" {
		t.Errorf("two notes = %q", got)
	}
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("ConfigMap namespace/object-%d", i))
	}
	got := Join(many)
	if len(got) > MaxNote || !strings.HasPrefix(got, "ConfigMap namespace/object-0; ") || !strings.Contains(got, " more") {
		t.Errorf("100 notes = %q (%d bytes)", got, len(got))
	}
	long := Join([]string{strings.Repeat("é", MaxNote), "next"})
	if len(long) > MaxNote || !utf8.ValidString(long) {
		t.Errorf("a note too long alone is cut to %d bytes, valid UTF-8 %v", len(long), utf8.ValidString(long))
	}
}

func TestANoteIsCutAtACharacterBoundary(t *testing.T) {
	note := Cut(strings.Repeat("€", MaxNote))
	if len(note) > MaxNote || !utf8.ValidString(note) || !strings.HasSuffix(note, "...") {
		t.Errorf("cut note: %d bytes, valid UTF-8 %v, ends %q", len(note), utf8.ValidString(note), note[len(note)-5:])
	}
	if got := Cut("short"); got != "short" {
		t.Errorf("a short note = %q", got)
	}
}
