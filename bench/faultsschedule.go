package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// plannedFault is one fault of the schedule: its kind, what it hits (a replica, a
// cluster, a push cluster's front, a faulted source, by index), when it starts after the
// schedule does, and how long it lasts.
type plannedFault struct {
	At, For time.Duration
	Kind    string
	Target  int
}

// plannedRevision is a new revision of one source kind, At after the schedule starts.
type plannedRevision struct {
	At   time.Duration
	Kind string
}

// faultTargets are how many targets each kind of fault has to choose from.
type faultTargets struct{ replicas, clusters, fronts, sources int }

// of is how many targets kind has: every replica but the witness for replicaKill.
func (t faultTargets) of(kind string) int {
	switch kind {
	case replicaKill:
		return t.replicas - 1
	case memberStop:
		return t.clusters
	case partition:
		return t.fronts
	case sourceFault:
		return t.sources
	}
	return 1
}

// faultLengths are how long each kind lasts, at least and at most.
var faultLengths = map[string][2]time.Duration{
	operatorKill: {2 * time.Second, 15 * time.Second},
	replicaKill:  {1 * time.Second, 20 * time.Second},
	memberStop:   {5 * time.Second, 40 * time.Second},
	hubStop:      {5 * time.Second, 25 * time.Second},
	partition:    {5 * time.Second, 45 * time.Second},
	sourceFault:  {5 * time.Second, 30 * time.Second},
}

// between is a duration drawn evenly from [lo, hi], to the 100 ms.
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	steps := int64((hi - lo) / (100 * time.Millisecond))
	return lo + time.Duration(r.Int64N(steps+1))*100*time.Millisecond
}

// planFaults draws the schedule of seed for a run of d: a fault every 3 to 20 s, so that
// they overlap, of a kind drawn at random, the first six one of each kind (3 to 8 s
// apart, so that a short run has them all). replicaKill never hits the witness, and an
// operatorKill drawn in the second half is a replicaKill: the witness lives through the
// second half. The same seed gives the same schedule.
func planFaults(seed int64, d time.Duration, t faultTargets) []plannedFault {
	r := rand.New(rand.NewPCG(uint64(seed), 1)) //nolint:gosec // a reproducible schedule, not a secret
	first := r.Perm(len(faultKinds))
	var plan []plannedFault
	for at := 5 * time.Second; at < d; {
		kind := faultKinds[r.IntN(len(faultKinds))]
		gap := between(r, 3*time.Second, 20*time.Second)
		if n := len(plan); n < len(first) {
			kind, gap = faultKinds[first[n]], between(r, 3*time.Second, 8*time.Second)
		}
		if kind == operatorKill && at >= d/2 {
			kind = replicaKill
		}
		target := r.IntN(t.of(kind))
		if kind == replicaKill && target >= witness {
			target++
		}
		lengths := faultLengths[kind]
		plan = append(plan, plannedFault{At: at, Kind: kind, Target: target, For: between(r, lengths[0], lengths[1])})
		at += gap
	}
	return plan
}

// planRevisions draws, from its own stream of seed, a new revision of a source every 8
// to 25 s for a run of d.
func planRevisions(seed int64, d time.Duration) []plannedRevision {
	r := rand.New(rand.NewPCG(uint64(seed), 2)) //nolint:gosec // a reproducible schedule, not a secret
	var plan []plannedRevision
	for at := between(r, 8*time.Second, 25*time.Second); at < d; at += between(r, 8*time.Second, 25*time.Second) {
		plan = append(plan, plannedRevision{At: at, Kind: sourceKinds[r.IntN(len(sourceKinds))]})
	}
	return plan
}

func (pf plannedFault) String() string {
	return fmt.Sprintf("%s of %d for %s", pf.Kind, pf.Target, pf.For)
}

// sleepUntil waits until at, or ctx's end; false if ctx ended first.
func sleepUntil(ctx context.Context, at time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(at)):
		return true
	}
}

// runSchedule injects every fault of plan and pushes every revision of revisions, each
// at its time, and returns once all are done and undone, with the time of the last and
// when each fault took effect. A fault that failed to is in the history, not counted.
func (f *faultsRun) runSchedule(ctx context.Context, plan []plannedFault, revisions []plannedRevision, fr *faultsResult) (last time.Time, injected []time.Time) {
	start := time.Now()
	var mu sync.Mutex
	last = start
	done := func() {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.After(last) {
			last = now
		}
	}
	var wg sync.WaitGroup
	for _, pf := range plan {
		wg.Go(func() {
			if !sleepUntil(ctx, start.Add(pf.At)) {
				return
			}
			if err := f.inject(pf); err != nil {
				f.history.record("inject %s: %v", pf, err)
				return
			}
			f.history.record("inject %s", pf)
			mu.Lock()
			fr.Injected[pf.Kind]++
			injected = append(injected, time.Now())
			mu.Unlock()
			// Undone even when ctx ends: nothing is left stopped or cut.
			_ = sleepUntil(ctx, time.Now().Add(pf.For))
			f.undo(ctx, pf)
			f.history.record("undo %s", pf)
			done()
		})
	}
	wg.Go(func() {
		for _, pr := range revisions {
			if !sleepUntil(ctx, start.Add(pr.At)) {
				return
			}
			k, err := f.sources.push(pr.Kind)
			if err != nil {
				f.history.record("push %s: %v", pr.Kind, err)
				continue
			}
			f.history.record("push %s revision %d", pr.Kind, k)
			mu.Lock()
			fr.RevisionsPushed++
			mu.Unlock()
			done()
		}
	})
	wg.Wait()
	return last, injected
}
