package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The kinds of fault the faults phase injects, as faults.injected counts them.
const (
	// operatorKill kills every replica at once (SIGKILL) and starts them again.
	operatorKill = "operatorKill"
	// replicaKill kills one replica (SIGKILL) and starts it again.
	replicaKill = "replicaKill"
	// memberStop stops a member's API server (SIGKILL) and starts it again, etcd kept.
	memberStop = "memberStop"
	// hubStop stops the hub's API server and starts it again.
	hubStop = "hubStop"
	// partition cuts a push cluster's front: connections open are closed, new ones are
	// held unanswered until it heals.
	partition = "partition"
	// sourceFault makes a source fail or hang: Infrahub answers 503, the Git server holds
	// every request, the registry cuts its blobs short.
	sourceFault = "sourceFault"
)

// faultKinds are every kind, in the order the schedule draws them.
var faultKinds = []string{operatorKill, replicaKill, memberStop, hubStop, partition, sourceFault}

// The checkers, as faults.violations counts what each found.
const (
	// deletedWhileOwned: a delivered object gone from its member while a bundle still
	// holds it (the phase's revisions never drop an object, so any).
	deletedWhileOwned = "deletedWhileOwned"
	// recreated: a delivered object seen again under a new UID.
	recreated = "recreated"
	// duplicateVidraResource: two live VidraResources for one sync, bundle and cluster.
	duplicateVidraResource = "duplicateVidraResource"
	// notConverged: a bundle not Ready at its latest revision within faultsConvergeBound
	// of the last fault.
	notConverged = "notConverged"
	// credentialInLog: a source's password or token in a log of the operator or agent.
	credentialInLog = "credentialInLog"
	// heapNotBack and goroutinesNotBack: the witness replica's heap or goroutines, once
	// converged, above their level before the faults by more than the allowance.
	heapNotBack       = "heapNotBack"
	goroutinesNotBack = "goroutinesNotBack"
)

var checkerNames = []string{deletedWhileOwned, recreated, duplicateVidraResource, notConverged, credentialInLog, heapNotBack, goroutinesNotBack}

// faultsConvergeBound is how long after the last fault every bundle has to be Ready at
// its latest revision; faultsConvergeTarget is the p99 the phase is held to.
const (
	faultsConvergeBound  = 5 * time.Minute
	faultsConvergeTarget = 60 * time.Second
)

// faultsResult is what the faults phase found.
type faultsResult struct {
	Seed            int64   `json:"seed"`
	DurationSeconds float64 `json:"durationSeconds"`
	// Clusters are the push clusters and the pull cluster; Replicas the operator's.
	Clusters int `json:"clusters"`
	Replicas int `json:"replicas"`
	Bundles  int `json:"bundles"`
	// Injected counts the faults by kind; every kind is present, 0 or not.
	Injected map[string]int `json:"injected"`
	// Violations counts what each checker found; every checker is present.
	Violations map[string]int `json:"violations"`
	// RevisionsPushed are the new revisions the sources got meanwhile.
	RevisionsPushed int `json:"revisionsPushed"`
	// ReplicaExits are the replicas that exited on their own (lost leadership while
	// the hub was down, say) and were started again, as a kubelet would.
	ReplicaExits int `json:"replicaExits"`
	// ConvergeSecondsP99 and Max: from the last fault undone or revision pushed, whichever
	// came later, to each bundle Ready at its latest revision on its cluster (the
	// member's objects hold it).
	ConvergeSecondsP99 float64 `json:"convergeSecondsP99"`
	ConvergeSecondsMax float64 `json:"convergeSecondsMax"`
	// The witness replica's goroutines and heap (after a collection) before the faults and
	// once converged after them; WitnessFaults are the faults its last process lived
	// through.
	WitnessFaults    int     `json:"witnessFaults"`
	GoroutinesBefore float64 `json:"goroutinesBefore"`
	GoroutinesAfter  float64 `json:"goroutinesAfter"`
	HeapBeforeMiB    float64 `json:"heapBeforeMiB"`
	HeapAfterMiB     float64 `json:"heapAfterMiB"`
	// ObjectsFollowed are the delivered objects the checkers saw at the end, over every
	// cluster, and VidraResourcesFollowed the hub's VidraResources: what they guarded.
	ObjectsFollowed        int `json:"objectsFollowed"`
	VidraResourcesFollowed int `json:"vidraResourcesFollowed"`
	// HistoryFile holds every fault and revision with its time, and every violation.
	HistoryFile string `json:"historyFile"`
}

func newFaultsResult(seed int64, d time.Duration) *faultsResult {
	fr := &faultsResult{Seed: seed, DurationSeconds: d.Seconds(), Injected: map[string]int{}, Violations: map[string]int{}}
	for _, k := range faultKinds {
		fr.Injected[k] = 0
	}
	for _, c := range checkerNames {
		fr.Violations[c] = 0
	}
	return fr
}

func (fr *faultsResult) violations() int {
	n := 0
	for _, v := range fr.Violations {
		n += v
	}
	return n
}

func (fr *faultsResult) targets() []check {
	if fr == nil {
		return nil
	}
	missing := 0
	for _, k := range faultKinds {
		if fr.Injected[k] == 0 {
			missing++
		}
	}
	return []check{
		{"faults: kinds of fault never injected", float64(missing), "== 0", missing == 0},
		{"faults: violations", float64(fr.violations()), "== 0", fr.violations() == 0},
		{"faults: converge p99 after the last fault (s)", fr.ConvergeSecondsP99, "<= 60", fr.ConvergeSecondsP99 <= faultsConvergeTarget.Seconds()},
	}
}

func (fr *faultsResult) print(w io.Writer) {
	counts := func(m map[string]int) string {
		parts := make([]string, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "faults (seed %d, %.0f s, %d clusters, %d replicas, %d bundles)\tinjected: %s; %d revisions pushed; %d replica exits on their own\n",
		fr.Seed, fr.DurationSeconds, fr.Clusters, fr.Replicas, fr.Bundles, counts(fr.Injected), fr.RevisionsPushed, fr.ReplicaExits)
	fmt.Fprintf(w, "  violations\t%s (checkers followed %d objects on the clusters, %d VidraResources)\n", counts(fr.Violations), fr.ObjectsFollowed, fr.VidraResourcesFollowed)
	fmt.Fprintf(w, "  after the last fault\tevery bundle at its latest revision: p99 %.1f s, max %.1f s; the witness replica (%d faults lived through): goroutines %.0f -> %.0f, heap %.1f -> %.1f MiB\n",
		fr.ConvergeSecondsP99, fr.ConvergeSecondsMax, fr.WitnessFaults, fr.GoroutinesBefore, fr.GoroutinesAfter, fr.HeapBeforeMiB, fr.HeapAfterMiB)
	fmt.Fprintf(w, "  history\t%s\n", fr.HistoryFile)
}

// measureFaults runs the faults phase: a fleet of -members push clusters (each behind a
// front) and one pull cluster, three sharded replicas, a sync of every source kind with
// shared objects and waves; faults drawn from -faults-seed for -faults-duration while
// the checkers watch; then convergence, the phase's syncs and clusters removed, and the
// final checks.
func (b *bench) measureFaults(ctx context.Context, r *results) error {
	b.stopOperator()
	defer func() {
		if err := b.launchOperator(ctx, "vidra-after-faults", b.WorkloadResync); err != nil {
			fmt.Fprintf(b.log, "  the operator did not start again after the faults: %v\n", err)
		}
	}()
	f, err := b.newFaultsRun(ctx)
	if err != nil {
		return err
	}
	defer f.close()
	fr := newFaultsResult(f.seed, b.FaultsDuration)
	r.Faults = fr
	fr.HistoryFile = f.history.path()
	fmt.Fprintf(b.log, "  faults seed %d (replay: %s)\n", f.seed, f.replay())
	err = f.setUp(ctx, fr)
	if err == nil {
		err = f.soak(ctx, fr)
	}
	// Cleared with the replicas still running, and only then are the logs read: what
	// they log while letting the fleet go is checked too.
	if clearErr := f.clear(context.WithoutCancel(ctx)); clearErr != nil {
		fmt.Fprintf(b.log, "  the faults phase's syncs and clusters not cleared: %v\n", clearErr)
	}
	if f.sources != nil {
		if scanErr := f.credentialsInLogs(); scanErr != nil {
			err = errors.Join(err, scanErr)
		}
	}
	fr.Violations = f.found.snapshot()
	if fr.violations() > 0 {
		fmt.Fprintf(b.log, "  VIOLATIONS under seed %d (replay: %s); the history:\n", f.seed, f.replay())
		f.history.print(b.log)
	}
	return err
}

// replay is the command that replays the run's schedule: the same seed, duration and
// fleet (the targets are drawn among its clusters).
func (f *faultsRun) replay() string {
	return fmt.Sprintf("go run ./bench -phases faults -faults-seed %d -faults-duration %s -members %d -objects %d", f.seed, f.FaultsDuration, f.Members, f.Objects)
}

// The witness is the replica the schedule never kills alone, and operatorKill only in
// the first half of the run: its last process lives through the second half's faults,
// which a leak of theirs would show in. Its goroutines and heap once converged after the
// faults may pass its level before them by the allowance: the same clusters' share, so
// the same caches and connections, but for timers and the Events recorder's recent
// Events.
const (
	witness             = 0
	goroutinesAllowance = 0.05
	goroutinesSlack     = 10
	heapAllowance       = 0.25
	heapSlackMiB        = 4
	faultsSettle        = 30 * time.Second
)

// soak runs the schedule with the checkers on, then waits for convergence and checks the
// witness's goroutines and heap. The witness is the leader at both looks: the leader runs
// the syncs' controllers too, and so has more goroutines and heap than another replica.
func (f *faultsRun) soak(ctx context.Context, fr *faultsResult) error {
	if err := f.replicas.makeLeader(ctx, witness); err != nil {
		return err
	}
	var err error
	if fr.GoroutinesBefore, fr.HeapBeforeMiB, _, err = f.settledUsage(ctx, "before"); err != nil {
		return err
	}
	checkCtx, stopCheckers := context.WithCancel(ctx)
	defer stopCheckers()
	checks, err := f.startCheckers(checkCtx)
	if err != nil {
		return err
	}
	plan := planFaults(f.seed, f.FaultsDuration, f.targets())
	revisions := planRevisions(f.seed, f.FaultsDuration)
	fmt.Fprintf(f.log, "  %d faults and %d revisions over %s; history: %s\n", len(plan), len(revisions), f.FaultsDuration, f.history.path())
	last, injected := f.runSchedule(ctx, plan, revisions, fr)
	f.history.record("last fault undone; waiting for every bundle at its latest revision %v", f.sources.revisions())
	at, convergeErr := f.converged(ctx, faultsConvergeBound)
	if convergeErr != nil {
		f.found.found(notConverged, "%v", convergeErr)
		f.replicas.dumpGoroutines(ctx, "not-converged")
	}
	fr.ConvergeSecondsP99, fr.ConvergeSecondsMax = convergeFigures(last, at, fr.Bundles, faultsConvergeBound)
	f.history.record("converged: p99 %.1f s, max %.1f s after the last fault or revision", fr.ConvergeSecondsP99, fr.ConvergeSecondsMax)
	// A last look by the checkers once all is quiet, then they stop.
	if !sleepUntil(ctx, time.Now().Add(3*time.Second)) {
		return ctx.Err()
	}
	fr.ObjectsFollowed, fr.VidraResourcesFollowed = checks.followed()
	stopCheckers()
	checks.wg.Wait()
	if err := f.replicas.makeLeader(ctx, witness); err != nil {
		return err
	}
	var started time.Time
	if fr.GoroutinesAfter, fr.HeapAfterMiB, started, err = f.settledUsage(ctx, "after"); err != nil {
		return err
	}
	for _, at := range injected {
		if at.After(started) {
			fr.WitnessFaults++
		}
	}
	if fr.GoroutinesAfter > fr.GoroutinesBefore*(1+goroutinesAllowance)+goroutinesSlack {
		f.found.found(goroutinesNotBack, "the witness has %.0f goroutines, %.0f before the faults", fr.GoroutinesAfter, fr.GoroutinesBefore)
	}
	if fr.HeapAfterMiB > fr.HeapBeforeMiB*(1+heapAllowance)+heapSlackMiB {
		f.found.found(heapNotBack, "the witness has %.1f MiB of heap, %.1f MiB before the faults", fr.HeapAfterMiB, fr.HeapBeforeMiB)
	}
	f.replicas.mu.Lock()
	fr.ReplicaExits = f.replicas.exits
	f.replicas.mu.Unlock()
	return nil
}

// settledUsage is the witness's goroutines and heap once faultsSettle has passed, the
// least of three looks a few seconds apart, and when its process started. Its goroutines
// and heap profile are saved as witness-goroutines-<label>.txt and
// witness-heap-<label>.pprof, for what grew.
func (f *faultsRun) settledUsage(ctx context.Context, label string) (goroutines, heapMiB float64, started time.Time, err error) {
	if !sleepUntil(ctx, time.Now().Add(faultsSettle)) {
		return 0, 0, started, ctx.Err()
	}
	goroutines, heapMiB = -1, -1
	for range 3 {
		g, h, s, err := f.replicas.usage(ctx, witness)
		if err != nil {
			return 0, 0, started, err
		}
		started = s
		if goroutines < 0 || g < goroutines {
			goroutines = g
		}
		if heapMiB < 0 || h < heapMiB {
			heapMiB = h
		}
		if !sleepUntil(ctx, time.Now().Add(3*time.Second)) {
			return 0, 0, started, ctx.Err()
		}
	}
	pprof := f.replicas.replicas[witness].pprof
	for path, file := range map[string]string{"goroutine?debug=1": "witness-goroutines-" + label + ".txt", "heap": "witness-heap-" + label + ".pprof"} {
		if err := saveProfileOf(ctx, "http://"+pprof+"/debug/pprof", path, filepath.Join(f.dir, file)); err != nil {
			return 0, 0, started, err
		}
	}
	return goroutines, heapMiB, started, nil
}
