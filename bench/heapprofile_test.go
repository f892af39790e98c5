package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"testing"
)

var held [][]byte

//go:noinline
func allocateForTheProfile(n, size int) {
	for range n {
		held = append(held, make([]byte, size))
	}
}

// TestHeapHeldUnderCountsWhatAFunctionAllocatedAndIsStillHeld: the bench reads from a
// real heap profile what the operator's Events recorder holds; here, what a function of
// this test holds, read the same way, and nothing for a function that holds nothing.
func TestHeapHeldUnderCountsWhatAFunctionAllocatedAndIsStillHeld(t *testing.T) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	t.Cleanup(func() { runtime.MemProfileRate = old; held = nil })
	allocateForTheProfile(1000, 1024)
	runtime.GC() // publishes what is held to the heap profile
	path := filepath.Join(t.TempDir(), "heap.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	name := runtime.FuncForPC(reflect.ValueOf(allocateForTheProfile).Pointer()).Name()
	got, err := heapHeldUnder(path, name)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1000 * 1024); got < want || got > 2*want {
		t.Errorf("held under allocateForTheProfile: %d bytes, want about %d", got, want)
	}
	if none, err := heapHeldUnder(path, name+"Elsewhere"); err != nil || none != 0 {
		t.Errorf("held under a function that allocated nothing: %d, %v", none, err)
	}
	if _, err := heapHeldUnder(filepath.Join(t.TempDir(), "missing"), name); err == nil {
		t.Error("a missing profile read without an error")
	}
}

// TestTheOperatorIsProfiledFinelyUnlessTheEnvironmentSaysOtherwise: the bench's
// operator samples its heap every heapProfileRate bytes, keeping the rest of GODEBUG,
// and a rate the bench's environment sets wins.
func TestTheOperatorIsProfiledFinelyUnlessTheEnvironmentSaysOtherwise(t *testing.T) {
	rate := fmt.Sprintf("memprofilerate=%d", heapProfileRate)
	for _, c := range []struct{ env, want []string }{
		{[]string{"HOME=/root"}, []string{"HOME=/root", "GODEBUG=" + rate}},
		{[]string{"GODEBUG=gctrace=1", "HOME=/root"}, []string{"GODEBUG=gctrace=1," + rate, "HOME=/root"}},
		{[]string{"GODEBUG=memprofilerate=4096"}, []string{"GODEBUG=memprofilerate=4096"}},
	} {
		if got := withProfileRate(slices.Clone(c.env)); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.env, got, c.want)
		}
	}
}
