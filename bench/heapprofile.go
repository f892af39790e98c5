package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/pprof/profile"
)

// eventsRecorder is the package of the Events recorder, whose broadcaster keeps every
// Event it recorded for six to twelve minutes, to fold repeats into a series: what it
// holds depends on how many Events the last minutes brought, not on how many objects
// are managed.
const eventsRecorder = "k8s.io/client-go/tools/events."

// heapHeldUnder is how many bytes of a heap profile's in-use space were allocated with
// a function whose name starts with prefix on the stack.
func heapHeldUnder(path, prefix string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	p, err := profile.Parse(f)
	if err != nil {
		return 0, fmt.Errorf("heap profile %s: %w", path, err)
	}
	index := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			index = i
		}
	}
	if index < 0 {
		return 0, fmt.Errorf("heap profile %s has no inuse_space", path)
	}
	var held int64
	for _, s := range p.Sample {
		if allocatedUnder(s, prefix) {
			held += s.Value[index]
		}
	}
	return held, nil
}

func allocatedUnder(s *profile.Sample, prefix string) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil && strings.HasPrefix(line.Function.Name, prefix) {
				return true
			}
		}
	}
	return false
}
