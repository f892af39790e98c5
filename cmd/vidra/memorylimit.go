package main

import (
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// memoryLimitRatio is the share of the container's memory limit the heap is kept under;
// the rest holds the goroutines' stacks and the runtime's own memory.
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit to memoryLimitRatio of the
// limit containerLimit reads (the container's cgroup, in the operator), unless
// GOMEMLIMIT is set or AUTOMEMLIMIT is "off". Without it the collector lets the heap grow
// to twice what is live before it collects, so a burst of deliveries by an operator
// whose fleet takes over half its limit would end with the container killed; with it
// the collector works harder near the limit instead.
func setMemoryLimit(log logr.Logger, containerLimit memlimit.Provider) {
	limit, err := memlimit.Set(memlimit.WithProvider(containerLimit), memlimit.WithRatio(memoryLimitRatio))
	if err != nil {
		log.Info("no memory limit read; the heap grows as GOGC alone allows", "reason", err.Error())
		return
	}
	if limit < math.MaxInt64 {
		log.Info("heap kept under a soft memory limit", "bytes", limit)
	}
}

// gcPercent is the collector's GOGC when the user sets none: the heap grows by half of
// what is live, rather than by all of it (Go's 100), before the collector runs. A fleet's
// operator keeps what it caches, and what it keeps during a burst of deliveries is
// allocated among the burst's garbage: the spans it sits in stay in use after the
// burst. Delivering to 1,000 clusters, the heap in use ended 2.05 times what was live
// at 100 and 1.55 times at 50 (idle RSS 723 -> 576 MiB); the collector runs twice as
// often during bursts, for a tenth to a fifth more of the operator's CPU (docs/scaling.md).
const gcPercent = 50

// setGCPercent sets GOGC to gcPercent unless gogc, the GOGC the process was started
// with, says otherwise.
func setGCPercent(log logr.Logger, gogc string) {
	if gogc != "" {
		return
	}
	debug.SetGCPercent(gcPercent)
	log.V(1).Info("garbage collector target set", "gogc", gcPercent)
}
