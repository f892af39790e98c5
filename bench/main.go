// Command bench measures the operator on real control planes: a hub and N members, the
// real bin/vidra, M VidraResources per member with K objects each. It prints a table of
// the figures and their targets and writes them to bench/results.json.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/vidra-operator/vidra/internal/testfleet"
)

// settings are the bench's size.
type settings struct {
	Members      int `json:"members"`
	Resources    int `json:"resourcesPerMember"`
	Objects      int `json:"objectsPerResource"`
	Workers      int `json:"workers"`
	DriftSamples int `json:"driftSamples"`
	Cycles       int `json:"engageCycles"`
}

func main() {
	var s settings
	out := flag.String("out", "bench/results.json", "Where the results are written (relative to the module's root).")
	flag.IntVar(&s.Members, "members", 8, "Member clusters.")
	flag.IntVar(&s.Resources, "resources", 10, "VidraResources per member.")
	flag.IntVar(&s.Objects, "objects", 10, "Objects (ConfigMaps) per VidraResource.")
	flag.IntVar(&s.Workers, "workers", 10, "Concurrency: the operator's --max-concurrent-reconciles, and the limit client's workers.")
	flag.IntVar(&s.DriftSamples, "drift-samples", 20, "Objects changed by hand to time drift repair.")
	flag.IntVar(&s.Cycles, "cycles", 100, "Engage/disengage cycles of the leak check.")
	flag.Parse()
	if err := run(context.Background(), s, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, s settings, out string, w io.Writer) error {
	root, err := testfleet.ModuleRoot()
	if err != nil {
		return err
	}
	// One member more than measured: the leak check engages and disengages it alone.
	fmt.Fprintf(w, "starting a hub and %d members...\n", s.Members+1)
	fleet, err := testfleet.Start(ctx, testfleet.Options{Members: s.Members + 1})
	if err != nil {
		return err
	}
	defer func() { _ = fleet.Stop() }()
	b := &bench{settings: s, root: root, fleet: fleet, members: fleet.Members[:s.Members], spare: fleet.Members[s.Members], log: w}
	if err := b.startOperator(ctx); err != nil {
		return err
	}
	defer b.stopOperator()

	r := results{Settings: s}
	for _, step := range []struct {
		what string
		do   func(context.Context, *results) error
	}{
		{"memory, idle", b.measureIdle},
		{"enroll", b.measureEnroll},
		{"converge", b.measureConverge},
		{"limit", b.measureLimit},
		{"drift", b.measureDrift},
		{"isolation", b.measureIsolation},
		{"leak check", b.measureLeaks},
	} {
		fmt.Fprintf(w, "measuring %s...\n", step.what)
		start := time.Now()
		if err := step.do(ctx, &r); err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
		fmt.Fprintf(w, "  done in %s\n", time.Since(start).Round(time.Millisecond))
	}
	r.judge()
	r.print(w)
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	return r.write(out)
}

// results are every figure of one run.
type results struct {
	Settings settings `json:"settings"`

	ConvergeSeconds       float64 `json:"convergeSeconds"`
	ConvergeObjectsPerSec float64 `json:"convergeObjectsPerSecond"`
	LimitObjectsPerSec    float64 `json:"limitObjectsPerSecond"`
	OperatorToLimit       float64 `json:"operatorToLimit"`

	EnrollP50Ms float64 `json:"enrollP50Ms"`
	EnrollP95Ms float64 `json:"enrollP95Ms"`
	DriftP50Ms  float64 `json:"driftP50Ms"`
	DriftP95Ms  float64 `json:"driftP95Ms"`

	IsolationUnpausedSeconds float64 `json:"isolationUnpausedSeconds"`
	IsolationPausedSeconds   float64 `json:"isolationPausedSeconds"`
	IsolationRatio           float64 `json:"isolationRatio"`

	IdleRSSMiB             float64 `json:"idleRSSMiB"`
	IdleHeapMiB            float64 `json:"idleHeapMiB"`
	ConvergedRSSMiB        float64 `json:"convergedRSSMiB"`
	ConvergedHeapMiB       float64 `json:"convergedHeapMiB"`
	RSSPerClusterMiB       float64 `json:"rssPerIdleClusterMiB"`
	HeapPerClusterMiB      float64 `json:"heapPerIdleClusterMiB"`
	GoroutinesPerCluster   float64 `json:"goroutinesPerCluster"`
	GoroutinesBeforeCycles float64 `json:"goroutinesBeforeCycles"`
	GoroutinesAfterCycles  float64 `json:"goroutinesAfterCycles"`
	HeapBeforeCyclesMiB    float64 `json:"heapBeforeCyclesMiB"`
	HeapAfterCyclesMiB     float64 `json:"heapAfterCyclesMiB"`
	// HeapAfterCyclesIdleMiB is the heap 100s after the cycles, once the connections'
	// idle timers have let the disengaged clusters' transports go.
	HeapAfterCyclesIdleMiB  float64 `json:"heapAfterCyclesIdleMiB"`
	Targets                 []check `json:"targets"`
	MeasuredAt              string  `json:"measuredAt"`
	ConvergedObjects        int     `json:"convergedObjects"`
	IsolationObjectsPerSide int     `json:"isolationObjectsPerRound"`
}

// check is one target and whether this run met it.
type check struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
}

func (r *results) judge() {
	r.MeasuredAt = time.Now().UTC().Format(time.RFC3339)
	r.Targets = []check{
		{"operator/limit", r.OperatorToLimit, ">= 0.6", r.OperatorToLimit >= 0.6},
		{"isolation ratio", r.IsolationRatio, "<= 1.2", r.IsolationRatio <= 1.2},
		{"drift p50 (ms)", r.DriftP50Ms, "<= 1000", r.DriftP50Ms <= 1000},
		{"enroll p50 (ms)", r.EnrollP50Ms, "<= 2000", r.EnrollP50Ms <= 2000},
		{"RSS per idle cluster (MiB)", r.RSSPerClusterMiB, "<= 5", r.RSSPerClusterMiB <= 5},
		// A leak of one goroutine per cycle would show as the number of cycles; the
		// allowance of 2 is the background's coming and going (connection read loops of
		// the other clusters, timers firing), seen as -4..+1 over runs.
		{"goroutine growth after cycles", r.GoroutinesAfterCycles - r.GoroutinesBeforeCycles, "<= 2", r.GoroutinesAfterCycles-r.GoroutinesBeforeCycles <= 2},
	}
}

func (r *results) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	s := r.Settings
	fmt.Fprintf(tw, "\n%d members x %d VidraResources x %d objects, %d workers\n\n", s.Members, s.Resources, s.Objects, s.Workers)
	fmt.Fprintf(tw, "measure\tvalue\n")
	fmt.Fprintf(tw, "converge\t%.2f s, %.0f objects/s (%d objects)\n", r.ConvergeSeconds, r.ConvergeObjectsPerSec, r.ConvergedObjects)
	fmt.Fprintf(tw, "limit (tight-loop SSA)\t%.0f objects/s\n", r.LimitObjectsPerSec)
	fmt.Fprintf(tw, "enroll\tp50 %.0f ms, p95 %.0f ms\n", r.EnrollP50Ms, r.EnrollP95Ms)
	fmt.Fprintf(tw, "drift repair\tp50 %.0f ms, p95 %.0f ms\n", r.DriftP50Ms, r.DriftP95Ms)
	fmt.Fprintf(tw, "isolation\t%.2f s unpaused, %.2f s with a member paused (%d objects each)\n", r.IsolationUnpausedSeconds, r.IsolationPausedSeconds, r.IsolationObjectsPerSide)
	fmt.Fprintf(tw, "memory idle\t%.1f MiB RSS, %.1f MiB heap\n", r.IdleRSSMiB, r.IdleHeapMiB)
	fmt.Fprintf(tw, "memory converged\t%.1f MiB RSS, %.1f MiB heap\n", r.ConvergedRSSMiB, r.ConvergedHeapMiB)
	fmt.Fprintf(tw, "per idle engaged cluster\t%.2f MiB RSS, %.2f MiB heap, %.0f goroutines\n", r.RSSPerClusterMiB, r.HeapPerClusterMiB, r.GoroutinesPerCluster)
	fmt.Fprintf(tw, "%d engage/disengage cycles\tgoroutines %.0f -> %.0f, heap %.1f -> %.1f MiB (%.1f MiB once idle)\n", s.Cycles, r.GoroutinesBeforeCycles, r.GoroutinesAfterCycles, r.HeapBeforeCyclesMiB, r.HeapAfterCyclesMiB, r.HeapAfterCyclesIdleMiB)
	fmt.Fprintf(tw, "\ntarget\tvalue\twant\tmet\n")
	for _, c := range r.Targets {
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%v\n", c.Name, c.Value, c.Target, c.Met)
	}
	_ = tw.Flush()
}

func (r *results) write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644) //nolint:gosec // results are meant to be read
}
