package main

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// The heap is kept under nine tenths of the container's limit, unless the user set
// GOMEMLIMIT or turned it off; a limit that cannot be read changes nothing.
func TestTheHeapIsKeptUnderNineTenthsOfTheContainersLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	const gib = int64(1) << 30
	unreadable := func() (uint64, error) { return 0, errors.New("no cgroup") }
	for _, c := range []struct {
		name, env, value string
		limit            memlimit.Provider
		want             int64
	}{
		{name: "a limit of 1 GiB", limit: memlimit.Limit(uint64(gib)), want: gib * 9 / 10},
		{name: "GOMEMLIMIT set", env: "GOMEMLIMIT", value: "123MiB", limit: memlimit.Limit(uint64(gib)), want: 5 * gib},
		{name: "turned off", env: "AUTOMEMLIMIT", value: "off", limit: memlimit.Limit(uint64(gib)), want: 5 * gib},
		{name: "no limit", limit: func() (uint64, error) { return 0, memlimit.ErrNoLimit }, want: math.MaxInt64},
		{name: "unreadable", limit: unreadable, want: 5 * gib},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(c.env, c.value)
			}
			debug.SetMemoryLimit(5 * gib)
			setMemoryLimit(logr.Discard(), c.limit)
			if got := debug.SetMemoryLimit(-1); got/1024 != c.want/1024 { // the ratio is applied in floating point
				t.Errorf("memory limit %d, want %d", got, c.want)
			}
		})
	}
}

// The collector runs at GOGC=50 unless the process was started with a GOGC of its own.
func TestTheCollectorTargetIsHalfOfWhatIsLiveUnlessGOGCIsSet(t *testing.T) {
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) })
	for _, c := range []struct {
		name, gogc string
		want       int
	}{
		{name: "GOGC unset", want: 50},
		{name: "GOGC set", gogc: "200", want: 100}, // the runtime read it at start; left alone
		{name: "GOGC off", gogc: "off", want: 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			setGCPercent(logr.Discard(), c.gogc)
			if got := debug.SetGCPercent(100); got != c.want {
				t.Errorf("GOGC %d, want %d", got, c.want)
			}
		})
	}
}
