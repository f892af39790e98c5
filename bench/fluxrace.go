package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// fluxRaceResult is Vidra and Flux's own controllers delivering one Git repository to
// the same clusters: each side's time from the request to sync a new commit to Ready on
// every cluster, the CPU its processes spent meanwhile (medians over the rounds), and
// the most memory they held over the phase.
type fluxRaceResult struct {
	Clusters         int      `json:"clusters"`
	ObjectsPerBundle int      `json:"objectsPerBundle"`
	Rounds           int      `json:"rounds"`
	FluxControllers  []string `json:"fluxControllers"`
	Vidra            raceSide `json:"vidra"`
	Flux             raceSide `json:"flux"`
}

// raceSide is one side's figures. CPUSeconds count from the request to a second after
// Ready, so that what a side writes just after (status, events) is counted too; the
// control planes' CPU meanwhile is the API servers' and etcds' work for the side, the
// members' and the hub's. PeakRSSMiB is the most the side's processes held at once,
// sampled every 100 ms from their start (the phase starts them) to the last round's end.
type raceSide struct {
	ReadySeconds        float64   `json:"readySeconds"`
	CPUSeconds          float64   `json:"cpuSeconds"`
	MembersCPUSeconds   float64   `json:"membersCPUSeconds"`
	HubCPUSeconds       float64   `json:"hubCPUSeconds"`
	PeakRSSMiB          float64   `json:"peakRSSMiB"`
	ReadySecondsByRound []float64 `json:"readySecondsByRound"`
	CPUSecondsByRound   []float64 `json:"cpuSecondsByRound"`
	membersCPU, hubCPU  []float64
}

// The fluxrace phase's names: its clusters' (a prefix of their own), the label its
// enrollment Secrets and VidraClusters carry, its GitSync and repository, the hub
// namespace Flux's controllers and objects are in.
const (
	raceClusterPrefix = "race-"
	raceLabel         = "bench.vidra.infrahub.operators.com/fluxrace"
	raceSyncName      = "bench-fluxrace"
	raceRepo          = "fluxrace"
	raceBranch        = "main"
	raceFluxNamespace = "flux-system"
	// raceFront offsets the phase's fronts from the other phases' addresses.
	raceFront = 3000
	// raceEvery is how often each side's Ready is looked at: Flux's is a List of every
	// cluster's Kustomization, which 10 ms would make the hub's main load.
	raceEvery = 100 * time.Millisecond
	// raceSettle is how long after Ready a side's CPU is still counted.
	raceSettle = time.Second
)

// fluxRace is the phase's state, which clean removes.
type fluxRace struct {
	*bench
	fronts   fronts
	clusters []fleetCluster
	git      *gitHost
	repo     *gitserver.Repo
	flux     []*fluxProcess
	// What setUp got to, so that clean removes that much.
	operatorRestarted, fluxObjects, enrolled bool
	// peaks samples each side's resident set while the phase runs.
	peaks *rssPeaks
}

// raceContender is one side of the race: its processes, how it is asked to sync, and
// whether it is Ready at a revision.
type raceContender struct {
	name      string
	pids      []int
	request   func(context.Context) error
	waitReady func(ctx context.Context, revision string) error
	figures   *raceSide
}

// measureFluxRace has Flux's controllers (built as the bench started) and Vidra deliver
// the repository's first commit to -race-clusters clusters, then times -race-rounds commits
// on each, the side that goes first alternating. Whatever the phase set up is removed
// when it ends, measured or not.
func (b *bench) measureFluxRace(ctx context.Context, r *results) (err error) {
	race := &fluxRace{bench: b}
	defer func() { err = errors.Join(err, race.clean(ctx)) }()
	if err := race.setUp(ctx); err != nil {
		return err
	}
	res, err := race.measure(ctx)
	if err != nil {
		return err
	}
	r.FluxRace = &res
	return nil
}

func (race *fluxRace) measure(ctx context.Context) (fluxRaceResult, error) {
	res := fluxRaceResult{Clusters: len(race.clusters), ObjectsPerBundle: race.Objects, Rounds: race.RaceRounds}
	for _, b := range race.fluxBuilds {
		res.FluxControllers = append(res.FluxControllers, b.name+" "+b.version)
	}
	sides := race.contenders(&res)
	for k := 1; k <= race.RaceRounds; k++ {
		commit, err := race.commit(k)
		if err != nil {
			return res, err
		}
		revision := raceBranch + "@sha1:" + commit
		for i := range sides {
			// The side that goes first alternates: neither is always the one whose
			// caches the other's reads warmed.
			side := sides[(i+k)%len(sides)]
			if err := race.time(ctx, side, revision); err != nil {
				return res, fmt.Errorf("round %d, %s: %w", k, side.name, err)
			}
		}
	}
	peaks, err := race.peaks.stop()
	if err != nil {
		return res, err
	}
	for i, side := range sides {
		f := side.figures
		f.ReadySeconds, f.CPUSeconds = median(f.ReadySecondsByRound), median(f.CPUSecondsByRound)
		f.MembersCPUSeconds, f.HubCPUSeconds = median(f.membersCPU), median(f.hubCPU)
		f.PeakRSSMiB = peaks[i]
	}
	return res, nil
}

// contenders are the two sides, Vidra's writing into res.Vidra and Flux's into res.Flux,
// in the order of race.pids.
func (race *fluxRace) contenders(res *fluxRaceResult) []raceContender {
	pids := race.pids()
	return []raceContender{
		{
			name:    "Vidra",
			pids:    pids[0],
			request: func(ctx context.Context) error { return requestGitSync(ctx, race.fleet.Hub.Client, raceSyncName) },
			waitReady: func(ctx context.Context, revision string) error {
				return waitGitSyncReady(ctx, race.fleet.Hub.Client, raceEvery, raceSyncName, revision, len(race.clusters))
			},
			figures: &res.Vidra,
		},
		{
			name:      "Flux",
			pids:      pids[1],
			request:   race.requestFlux,
			waitReady: race.waitFluxReady,
			figures:   &res.Flux,
		},
	}
}

// pids are the processes of each side: Vidra's, then Flux's.
func (race *fluxRace) pids() [][]int {
	flux := make([]int, 0, len(race.flux))
	for _, p := range race.flux {
		flux = append(flux, p.cmd.Process.Pid)
	}
	return [][]int{{race.operator.Process.Pid}, flux}
}

// time asks side to sync now and times it to Ready at revision, counting its CPU and
// the control planes'.
func (race *fluxRace) time(ctx context.Context, side raceContender, revision string) error {
	members := race.members[:min(len(race.clusters), len(race.members))]
	before, err := cpuOf(side.pids)
	if err != nil {
		return err
	}
	membersBefore, hubBefore := race.controlPlanesCPU(members)
	start := time.Now()
	if err := side.request(ctx); err != nil {
		return err
	}
	if err := side.waitReady(ctx, revision); err != nil {
		return err
	}
	ready := time.Since(start)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(raceSettle):
	}
	after, err := cpuOf(side.pids)
	if err != nil {
		return err
	}
	membersAfter, hubAfter := race.controlPlanesCPU(members)
	f := side.figures
	f.ReadySecondsByRound = append(f.ReadySecondsByRound, ready.Seconds())
	f.CPUSecondsByRound = append(f.CPUSecondsByRound, after-before)
	f.membersCPU, f.hubCPU = append(f.membersCPU, membersAfter-membersBefore), append(f.hubCPU, hubAfter-hubBefore)
	fmt.Fprintf(race.log, "    %s Ready on %d clusters in %s, %.2f CPU seconds\n", side.name, len(race.clusters), ready.Round(time.Millisecond), after-before)
	return nil
}

// cpuOf is the CPU time the processes have spent.
func cpuOf(pids []int) (float64, error) {
	var total float64
	for _, pid := range pids {
		s, err := processCPUSeconds(pid)
		if err != nil {
			return 0, fmt.Errorf("the CPU time of process %d: %w", pid, err)
		}
		total += s
	}
	return total, nil
}

// targets are the race's: Vidra Ready in at most half Flux's time, with at most half its
// CPU, and no more memory (none when the phase did not run).
func (res *fluxRaceResult) targets() []check {
	if res == nil {
		return nil
	}
	v, f := res.Vidra, res.Flux
	return []check{
		{"fluxrace: Vidra/Flux commit to Ready", ratio(v.ReadySeconds, f.ReadySeconds), "<= 0.5", v.ReadySeconds <= f.ReadySeconds/2},
		{"fluxrace: Vidra/Flux CPU seconds", ratio(v.CPUSeconds, f.CPUSeconds), "<= 0.5", v.CPUSeconds <= f.CPUSeconds/2},
		{"fluxrace: Vidra/Flux peak RSS", ratio(v.PeakRSSMiB, f.PeakRSSMiB), "<= 1", v.PeakRSSMiB <= f.PeakRSSMiB},
	}
}

// ratio is a/b, or 0 when b is.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (res *fluxRaceResult) print() string {
	side := func(s raceSide) string {
		return fmt.Sprintf("Ready in %.2f s (%s), %.2f CPU s (%s; control planes %.2f s members', %.2f s hub's), peak RSS %.0f MiB",
			s.ReadySeconds, joined(s.ReadySecondsByRound, "%.2f"), s.CPUSeconds, joined(s.CPUSecondsByRound, "%.2f"), s.MembersCPUSeconds, s.HubCPUSeconds, s.PeakRSSMiB)
	}
	return fmt.Sprintf("Vidra %s; Flux %s", side(res.Vidra), side(res.Flux))
}
