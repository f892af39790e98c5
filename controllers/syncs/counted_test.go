package syncs

import "testing"

func TestCountsReadAsPeopleWriteThem(t *testing.T) {
	for n, want := range map[int]string{0: "0 artifacts", 1: "1 artifact", 2: "2 artifacts"} {
		if got := Counted(n, "artifact"); got != want {
			t.Errorf("Counted(%d) = %q, want %q", n, got, want)
		}
	}
}
