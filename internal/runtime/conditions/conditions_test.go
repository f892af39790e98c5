package conditions

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundedKeepsAConditionMessageWithinWhatTheAPIServerTakes(t *testing.T) {
	if got := Bounded("short"); got != "short" {
		t.Errorf("Bounded(short) = %q", got)
	}
	exact := strings.Repeat("a", MaxMessage)
	if got := Bounded(exact); got != exact {
		t.Error("a message of exactly MaxMessage bytes was cut")
	}
	long := strings.Repeat("é", MaxMessage) // two bytes each: a cut can fall mid-character
	got := Bounded(long)
	if len(got) > MaxMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "(cut)") || !strings.HasPrefix(got, "éé") {
		t.Errorf("Bounded(%d bytes) = %d bytes, valid UTF-8 %v, ending %q", len(long), len(got), utf8.ValidString(got), got[len(got)-12:])
	}
}
