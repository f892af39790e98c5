package main

import (
	"math"

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
