package main

import (
	"bytes"
	"strings"
	"testing"
)

// A run of some phases judges and prints the figures of those alone: before, a run of
// -phases faults printed enroll, drift, isolation and memory rows of zeros, and judged
// their targets met.
func TestOnlyThePhasesThatRanAreJudgedAndPrinted(t *testing.T) {
	for _, tc := range []struct {
		phases      []string
		want, never []string
	}{
		{phases: []string{"faults"}, never: []string{"isolation", "drift", "enroll", "RSS per idle cluster", "goroutine growth", "memory idle", "memory converged", "engage/disengage"}},
		{phases: []string{"drift"}, want: []string{"drift", "enroll", "memory converged"}, never: []string{"isolation", "goroutine growth", "memory idle"}},
		{phases: nil, want: []string{"isolation", "drift", "enroll", "RSS per idle cluster", "goroutine growth", "memory idle", "memory converged", "engage/disengage"}},
	} {
		r := results{Settings: settings{Phases: tc.phases}}
		r.judge()
		var out bytes.Buffer
		r.print(&out)
		var judged []string
		for _, c := range r.Targets {
			judged = append(judged, c.Name)
		}
		seen := strings.Join(judged, "\n") + "\n" + out.String()
		for _, w := range tc.want {
			if !strings.Contains(seen, w) {
				t.Errorf("-phases %v: %q neither judged nor printed:\n%s", tc.phases, w, seen)
			}
		}
		for _, n := range tc.never {
			if strings.Contains(seen, n) {
				t.Errorf("-phases %v: %q judged or printed, though its phase did not run:\n%s", tc.phases, n, seen)
			}
		}
	}
}
