package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// Where the processes run. "shared": every process may use every CPU, so the hub's and
// the operator's work takes CPU from the members' API servers, which a fleet never does.
// "apart": the measured members' control planes get half of the CPUs, and the hub, the
// operator and the bench (the tight loop's client included) the other half, as the hub
// and its members are separate machines in a real fleet. The limit is measured the same
// way in each, so operator/limit compares like with like.
const (
	placementShared = "shared"
	placementApart  = "apart"
)

// cpus are the CPUs the bench may use, and their two halves.
type cpus struct{ all, members, rest unix.CPUSet }

// cpuHalves splits the CPUs this process may use (read once, before anything is placed)
// into two sets: the members', and the rest's. It fails with fewer than two CPUs.
func cpuHalves() (cpus, error) {
	var c cpus
	if err := unix.SchedGetaffinity(0, &c.all); err != nil {
		return c, fmt.Errorf("read CPU affinity: %w", err)
	}
	var ids []int
	for cpu := range 1024 {
		if c.all.IsSet(cpu) {
			ids = append(ids, cpu)
		}
	}
	if len(ids) < 2 {
		return c, fmt.Errorf("%d CPU: nothing to place apart", len(ids))
	}
	for i, cpu := range ids {
		if i < len(ids)/2 {
			c.members.Set(cpu)
		} else {
			c.rest.Set(cpu)
		}
	}
	return c, nil
}

// place runs the members' control planes on the members' CPUs and the hub's, the
// operator and the bench on the rest; with together set, every one of them on both.
func (b *bench) place(members []*testfleet.Cluster, together bool) error {
	if b.cpus == nil {
		return fmt.Errorf("no CPUs to place processes on")
	}
	memberCPUs, restCPUs := b.cpus.members, b.cpus.rest
	if together {
		memberCPUs, restCPUs = b.cpus.all, b.cpus.all
	}
	memberPIDs, err := controlPlanePIDs(members)
	if err != nil {
		return err
	}
	hubPIDs, err := controlPlanePIDs([]*testfleet.Cluster{b.fleet.Hub})
	if err != nil {
		return err
	}
	for _, pid := range memberPIDs {
		if err := pin(pid, &memberCPUs); err != nil {
			return err
		}
	}
	for _, pid := range append(hubPIDs, b.operator.Process.Pid, os.Getpid()) {
		if err := pin(pid, &restCPUs); err != nil {
			return err
		}
	}
	return nil
}

// pin sets the CPU affinity of every thread of the process; threads it starts later
// inherit it.
func pin(pid int, cpus *unix.CPUSet) error {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return fmt.Errorf("threads of process %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, cpus); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}
