package main

import (
	"fmt"
	"io"
)

// phaseTargets are the targets of the phases whose figures are fields of results, for the
// phases that ran alone: a figure never measured is no target met.
func (r *results) phaseTargets() []check {
	s := r.Settings
	var targets []check
	if s.runs("isolation") {
		targets = append(targets, check{"isolation ratio", r.IsolationRatio, "<= 1.2", r.IsolationRatio <= 1.2})
	}
	if s.runs("drift") {
		targets = append(targets, check{"drift p50 (ms)", r.DriftP50Ms, "<= 1000", r.DriftP50Ms <= 1000})
	}
	if s.runs("enroll") {
		targets = append(targets,
			check{"enroll p50 (ms)", r.EnrollP50Ms, "<= 2000", r.EnrollP50Ms <= 2000},
			check{"RSS per idle cluster (MiB)", r.RSSPerClusterMiB, "<= 5", r.RSSPerClusterMiB <= 5})
	}
	if s.runs("leaks") {
		// A leak of one goroutine per cycle would show as the number of cycles; the
		// allowance of 2 is the background's coming and going (connection read loops of
		// the other clusters, timers firing), seen as -4..+1 over runs.
		growth := r.GoroutinesAfterCycles - r.GoroutinesBeforeCycles
		targets = append(targets, check{"goroutine growth after cycles", growth, "<= 2", growth <= 2})
	}
	return targets
}

// printPhases prints the figures of those phases, for the phases that ran alone.
func (r *results) printPhases(w io.Writer) {
	s := r.Settings
	if s.runs("enroll") {
		fmt.Fprintf(w, "enroll\tp50 %.0f ms, p95 %.0f ms\n", r.EnrollP50Ms, r.EnrollP95Ms)
	}
	if s.runs("drift") {
		fmt.Fprintf(w, "drift repair\tp50 %.0f ms, p95 %.0f ms\n", r.DriftP50Ms, r.DriftP95Ms)
	}
	if s.runs("isolation") {
		fmt.Fprintf(w, "isolation\t%.2f s unpaused, %.2f s with a member paused (%d objects each); ratio by round %s\n",
			r.IsolationUnpausedSeconds, r.IsolationPausedSeconds, r.IsolationObjectsPerSide, ratios(r.IsolationRatios))
	}
	if s.runs("idle") {
		fmt.Fprintf(w, "memory idle\t%.1f MiB RSS, %.1f MiB heap\n", r.IdleRSSMiB, r.IdleHeapMiB)
	}
	if s.runs("converge") {
		fmt.Fprintf(w, "memory converged\t%.1f MiB RSS, %.1f MiB heap (%.2f MiB heap per watched kind and cluster, %d objects per cluster)\n",
			r.ConvergedRSSMiB, r.ConvergedHeapMiB, r.HeapPerWatchedKindMiB, r.ObjectsPerCluster)
	}
	if s.runs("enroll") {
		fmt.Fprintf(w, "per idle engaged cluster\t%.2f MiB RSS, %.2f MiB heap, %.0f goroutines\n", r.RSSPerClusterMiB, r.HeapPerClusterMiB, r.GoroutinesPerCluster)
	}
	if s.runs("leaks") {
		fmt.Fprintf(w, "%d engage/disengage cycles\tgoroutines %.0f -> %.0f, heap %.1f -> %.1f MiB (%.1f MiB once idle)\n",
			s.Cycles, r.GoroutinesBeforeCycles, r.GoroutinesAfterCycles, r.HeapBeforeCyclesMiB, r.HeapAfterCyclesMiB, r.HeapAfterCyclesIdleMiB)
	}
}
