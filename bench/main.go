// Command bench measures the operator on real control planes: a hub and N members, the
// real bin/vidra, M VidraResources per member with K objects each. It prints a table of
// the figures and their targets and writes them to bin/bench/results.json.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vidra-operator/vidra/internal/test/capi"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// settings are the bench's size.
type settings struct {
	Members   int `json:"members"`
	Resources int `json:"resourcesPerMember"`
	Objects   int `json:"objectsPerResource"`
	Workers   int `json:"workers"`
	// PerClusterWorkers is how many of the workers one member holds at once.
	PerClusterWorkers int `json:"perClusterWorkers"`
	DriftSamples      int `json:"driftSamples"`
	Cycles            int `json:"engageCycles"`
	// The bulk workload: many VidraResources of more objects on one member.
	BulkResources int `json:"bulkResources"`
	BulkObjects   int `json:"bulkObjectsPerResource"`
	// The bundle workload: one VidraResource of many objects.
	BundleObjects int `json:"bundleObjects"`
	// Rounds is how many times each workload and its limit are measured (medians kept).
	Rounds int           `json:"rounds"`
	Resync time.Duration `json:"resyncInterval"`
	// WorkloadResync is the operator's --resync-interval in every other phase.
	WorkloadResync time.Duration `json:"workloadResyncInterval"`
	// Apart delivers each workload a second time with the members' control planes on
	// CPUs of their own (see placement.go).
	Apart bool `json:"apart,omitempty"`
	// The pull phase: pull clusters (agents on the first members), their heartbeat, how
	// long their idle requests to the hub are counted, and the changes timed to Ready.
	PullMembers   int           `json:"pullMembers"`
	PullHeartbeat time.Duration `json:"pullHeartbeat"`
	PullIdle      time.Duration `json:"pullIdleWindow"`
	PullChanges   int           `json:"pullChanges"`
	// The fleet phase: the fleet sizes measured in turn, each cluster's bundles, and how
	// long an idle fleet's requests are counted.
	FleetClusters []int         `json:"fleetClusters"`
	FleetBundles  int           `json:"fleetBundlesPerCluster"`
	FleetIdle     time.Duration `json:"fleetIdleWindow"`
	FleetResync   time.Duration `json:"fleetResyncInterval"`
	FleetReplicas int           `json:"fleetReplicas,omitempty"`
	FleetRounds   int           `json:"fleetRounds"`
	FleetPlot     string        `json:"-"`
	// The variables phase: the clusters of one GitSync with spec.postBuild, the distinct
	// variable sets among them, and the revisions committed and timed.
	VariablesClusters  int `json:"variablesClusters"`
	VariablesSets      int `json:"variablesSets"`
	VariablesRevisions int `json:"variablesRevisions"`
	// The previews phase: the fleet sizes of a GitSync previewing branches, and the
	// branches pushed and timed at each.
	PreviewsClusters []int `json:"previewsClusters"`
	PreviewsRounds   int   `json:"previewsRounds"`
	// The inventory phase: Cluster API clusters enrolled through the inventory.
	InventoryClusters int `json:"inventoryClusters"`
	// The faults phase: how long faults are injected, and the seed of their schedule
	// (0: drawn, and printed).
	FaultsDuration time.Duration `json:"faultsDuration"`
	FaultsSeed     int64         `json:"faultsSeed,omitempty"`
	// The fluxrace phase: the clusters both sides deliver to, and the commits timed.
	RaceClusters int `json:"raceClusters"`
	RaceRounds   int `json:"raceRounds"`
	// Phases limits the run to these phases (all when empty).
	Phases []string `json:"phases,omitempty"`
}

func main() {
	var s settings
	out := flag.String("out", "bin/bench/results.json", "Where the results are written (relative to the module's root; bin/ is not tracked). bench/reference-results.json keeps a reference run.")
	flag.IntVar(&s.Members, "members", 8, "Member clusters.")
	flag.IntVar(&s.Resources, "resources", 10, "VidraResources per member.")
	flag.IntVar(&s.Objects, "objects", 10, "Objects (ConfigMaps) per VidraResource.")
	flag.IntVar(&s.Workers, "workers", 10, "Concurrency: the operator's --max-concurrent-reconciles, and the limit client's workers.")
	flag.IntVar(&s.PerClusterWorkers, "per-cluster-workers", 5, "The operator's --max-concurrent-reconciles-per-cluster: most of the workers one member holds at once (the operator's default, 5).")
	flag.IntVar(&s.DriftSamples, "drift-samples", 20, "Objects changed by hand to time drift repair.")
	flag.IntVar(&s.Cycles, "cycles", 100, "Engage/disengage cycles of the leak check.")
	flag.IntVar(&s.BulkResources, "bulk-resources", 200, "VidraResources of the bulk workload, all on the first member; 0 skips it.")
	flag.IntVar(&s.Rounds, "rounds", 5, "Times each workload, and its tight-loop limit, are measured, alternating; the medians are kept.")
	flag.IntVar(&s.BulkObjects, "bulk-objects", 25, "Objects (ConfigMaps) per VidraResource of the bulk workload.")
	flag.IntVar(&s.BundleObjects, "bundle-objects", 5000, "Objects (ConfigMaps) of the bundle workload's one VidraResource, on the first member; 0 skips it.")
	flag.DurationVar(&s.Resync, "resync", 30*time.Second, "The operator's --resync-interval in the resync phase, which waits one interval (on an operator restarted so, then put back).")
	flag.DurationVar(&s.WorkloadResync, "workload-resync", 10*time.Minute, "The operator's --resync-interval outside the resync phase: its default, as the chart runs it. -resync's 30s would resync every VidraResource delivered before while the next workload is timed, work the peers it is compared with do not do.")
	flag.BoolVar(&s.Apart, "apart", false, "Deliver each workload a second time with the members' control planes on half of the CPUs and the hub, the operator and the bench on the other half, as separate machines would be.")
	flag.IntVar(&s.PullMembers, "pull-members", 3, "Pull clusters of the pull phase: each the agent, run in the bench process, of one of the first members (at most -members).")
	flag.DurationVar(&s.PullHeartbeat, "pull-heartbeat", 10*time.Second, "The pull agents' --agent-heartbeat; the idle figures are also given normalised to the default, 30s.")
	flag.DurationVar(&s.PullIdle, "pull-idle", 60*time.Second, "How long the idle pull agents' requests to the hub are counted.")
	flag.IntVar(&s.PullChanges, "pull-changes", 20, "Changes to a pull cluster's VidraResource timed from the hub's change to the hub's Ready.")
	fleetClusters := flag.String("fleet-clusters", "100", "Comma-separated fleet sizes of the fleet phase, each measured on a fresh operator (100,300,1000).")
	flag.IntVar(&s.FleetBundles, "fleet-bundles", 10, "Bundles (of -objects ConfigMaps) per cluster of the fleet phase, each from an InfrahubSync of its own.")
	flag.DurationVar(&s.FleetIdle, "fleet-idle", 60*time.Second, "How long an idle fleet's requests are counted.")
	flag.IntVar(&s.FleetRounds, "fleet-rounds", 2, "Times the smallest of several fleet sizes is delivered, each from nothing: half of them (rounded up) before the larger sizes, the others after the largest. The base of the largest size's throughput ratio is the mean of the median round before and the median round after, which a machine whose speed drifts through the phase moves as it moves the largest.")
	flag.IntVar(&s.FleetReplicas, "fleet-replicas", 0, "After the largest fleet, this many replicas with --sharding take it over from the one operator; then one is killed. 0 or 1: none.")
	flag.DurationVar(&s.FleetResync, "fleet-resync", 10*time.Minute, "The operator's --resync-interval in the fleet phase: its default, as the chart runs it (-resync's 30s would ask 333 reconciles a second of 1,000 clusters' 10,000 VidraResources).")
	flag.StringVar(&s.FleetPlot, "fleet-plot", "bin/bench/fleet.svg", "Where the fleet phase's plot of its figures against the fleet size is written (relative to the module's root).")
	flag.IntVar(&s.VariablesClusters, "variables-clusters", 100, "Clusters of the variables phase (fronts of the members, as the fleet phase's), all delivered one GitSync with spec.postBuild.")
	flag.IntVar(&s.VariablesSets, "variables-sets", 3, "Distinct variable sets among the variables phase's clusters: each is labeled ring=r<i mod this>, which its bundle names (at most -variables-clusters).")
	previewsClusters := flag.String("previews-clusters", "10,100", "Comma-separated fleet sizes of the previews phase: clusters (fronts of the members) of one GitSync previewing branches, set up as the variables phase's.")
	flag.IntVar(&s.PreviewsRounds, "previews-rounds", 5, "Rounds of the previews phase at each size: a branch pushed and timed to its preview on every cluster, then another sync's delivery timed beside another preview.")
	flag.IntVar(&s.InventoryClusters, "inventory-clusters", 300, "Cluster API Clusters of the inventory phase (fronts of the members), each with its admin kubeconfig Secret, timed until Engaged.")
	flag.IntVar(&s.VariablesRevisions, "variables-revisions", 5, "Revisions the variables phase commits, each synced and timed to Ready; the builds they took are counted.")
	flag.DurationVar(&s.FaultsDuration, "faults-duration", 10*time.Minute, "How long the faults phase injects faults into its fleet (-members push clusters, one pull cluster, three sharded replicas), before it waits for convergence.")
	flag.Int64Var(&s.FaultsSeed, "faults-seed", 0, "The seed of the faults phase's schedule: the seed a run printed replays its faults and revisions; 0 draws one.")
	flag.IntVar(&s.RaceClusters, "race-clusters", 20, "Clusters of the fluxrace phase (fronts of the members), delivered one Git repository by Vidra (one GitSync) and by Flux's source-controller and kustomize-controller (a GitRepository and a Kustomization per cluster).")
	flag.IntVar(&s.RaceRounds, "race-rounds", 4, "Commits the fluxrace phase times on each side, the side going first alternating (Flux's first in odd rounds); the medians are kept.")
	profileDir := flag.String("profile", "", "Record CPU profiles of the operator, the hub and the first member while each workload, and then its tight-loop limit, are delivered (first round), from half way through the delivery of each fleet size and from the start of its idle window, into this directory.")
	profileSeconds := flag.Int("profile-seconds", 5, "How long each profile of -profile records, from the start of a workload.")
	phases := flag.String("phases", "", "Comma-separated phases to run (idle,enroll,converge,resync,bulk,bundle,drift,isolation,noisy,hostile,leaks,pull,variables,previews,inventory,faults,fluxrace,fleet); empty: all. enroll and converge are run when a later phase needs them.")
	flag.Parse()
	if s.Rounds < 1 {
		fmt.Fprintln(os.Stderr, "bench: -rounds must be at least 1")
		os.Exit(2)
	}
	if s.Resync <= 0 || s.WorkloadResync <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -resync and -workload-resync must be positive")
		os.Exit(2)
	}
	if s.PullHeartbeat <= 0 || s.PullIdle <= 0 || s.PullChanges < 1 || s.PullMembers < 1 {
		fmt.Fprintln(os.Stderr, "bench: -pull-heartbeat and -pull-idle must be positive, -pull-members and -pull-changes at least 1")
		os.Exit(2)
	}
	var err error
	if s.FleetClusters, err = sizes(*fleetClusters); err != nil || s.FleetBundles < 1 || s.FleetRounds < 1 || s.FleetIdle <= 0 || s.FleetResync <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -fleet-clusters must be positive sizes, -fleet-bundles and -fleet-rounds at least 1, -fleet-idle and -fleet-resync positive", err)
		os.Exit(2)
	}
	if s.VariablesClusters < 1 || s.VariablesSets < 1 || s.VariablesSets > s.VariablesClusters || s.VariablesRevisions < 1 {
		fmt.Fprintln(os.Stderr, "bench: -variables-clusters, -variables-sets and -variables-revisions must be at least 1, -variables-sets at most -variables-clusters")
		os.Exit(2)
	}
	if s.PreviewsClusters, err = sizes(*previewsClusters); err != nil || s.PreviewsRounds < 1 {
		fmt.Fprintln(os.Stderr, "bench: -previews-clusters must be positive sizes, -previews-rounds at least 1", err)
		os.Exit(2)
	}
	if s.FaultsDuration <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -faults-duration must be positive")
		os.Exit(2)
	}
	if s.RaceClusters < 1 || s.RaceRounds < 1 {
		fmt.Fprintln(os.Stderr, "bench: -race-clusters and -race-rounds must be at least 1")
		os.Exit(2)
	}
	if *phases != "" {
		s.Phases = strings.Split(*phases, ",")
	}
	var p *profiler
	if *profileDir != "" {
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		p = &profiler{dir: *profileDir, seconds: *profileSeconds}
	}
	if err := run(context.Background(), s, p, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, s settings, p *profiler, out string, w io.Writer) error {
	root, err := testfleet.ModuleRoot()
	if err != nil {
		return err
	}
	// Built first (once per machine, a few minutes), before the fleet takes the CPUs.
	var fluxBuilds []fluxBuild
	if s.runs("fluxrace") {
		if fluxBuilds, err = buildFlux(ctx, root, w); err != nil {
			return err
		}
	}
	// One member more than measured: the leak check engages and disengages it alone.
	fmt.Fprintf(w, "starting a hub and %d members...\n", s.Members+1)
	crds, err := capi.HubCRDDirectories()
	if err != nil {
		return err
	}
	fleet, err := testfleet.Start(ctx, testfleet.Options{Members: s.Members + 1, HubCRDDirectories: crds})
	if err != nil {
		return err
	}
	defer func() { _ = fleet.Stop() }()
	b := &bench{settings: s, root: root, fleet: fleet, members: fleet.Members[:s.Members], spare: fleet.Members[s.Members], log: w, profiler: p, fluxBuilds: fluxBuilds}
	if c, err := cpuHalves(); err == nil {
		b.cpus = &c
	} else {
		b.cpusErr = err
	}
	if err := b.startOperator(ctx); err != nil {
		return err
	}
	defer b.stopOperator()

	r := results{Settings: s}
	for _, step := range []struct {
		phase, what string
		do          func(context.Context, *results) error
	}{
		{"idle", "memory, idle", b.measureIdle},
		{"enroll", "enroll", b.measureEnroll},
		{"converge", "converge (and its tight-loop limit)", b.measureConverge},
		{"resync", "an unchanged resync", b.measureResync},
		{"bulk", "bulk converge on one member (and its limit)", b.measureBulk},
		{"bundle", "one large bundle on one member (and its limit)", b.measureBundle},
		{"drift", "drift", b.measureDrift},
		{"isolation", "isolation", b.measureIsolation},
		{"noisy", "one team's bundle beside another team's misbehaviour", b.measureNoisy},
		{"hostile", "one team's sync beside another team's hostile sources", b.measureHostile},
		{"leaks", "leak check", b.measureLeaks},
		{"pull", "pull mode: idle agents' hub requests, change to Ready", b.measurePull},
		{"variables", "one GitSync with spec.postBuild to -variables-clusters clusters of -variables-sets variable sets: builds per revision", b.measureVariables},
		{"previews", "a GitSync previewing branches on -previews-clusters clusters: push to preview, another sync's delivery meanwhile", b.measurePreviews},
		{"inventory", "-inventory-clusters Cluster API clusters enrolled through the inventory: created to Engaged", b.measureInventory},
		{"faults", "a fleet under faults drawn from -faults-seed for -faults-duration, its promises checked", b.measureFaults},
		{"fluxrace", "Vidra and Flux's own controllers delivering one Git repository to -race-clusters clusters: commit to Ready, CPU, memory", b.measureFluxRace},
		// Last: it restarts the operator for each fleet size.
		{"fleet", "fleets of -fleet-clusters clusters: enrollment, delivery, idle cost", b.measureFleet},
	} {
		if !s.runs(step.phase) {
			continue
		}
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
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := r.write(out); err != nil {
		return err
	}
	if len(r.Fleet) > 0 {
		plot := s.FleetPlot
		if !filepath.IsAbs(plot) {
			plot = filepath.Join(root, plot)
		}
		if err := plotFleet(r.Fleet, plot); err != nil {
			return err
		}
		fmt.Fprintf(w, "fleet plot written to %s\n", plot)
	}
	fmt.Fprintf(w, "\nresults written to %s\n", out)
	return nil
}

// runs says whether the phase runs: every phase does by default; enroll and converge run
// whenever a later phase needs their clusters and objects.
func (s settings) runs(phase string) bool {
	if len(s.Phases) == 0 || slices.Contains(s.Phases, phase) {
		return true
	}
	switch phase {
	case "enroll":
		return slices.ContainsFunc(s.Phases, func(p string) bool {
			return !slices.Contains([]string{"idle", "leaks", "pull", "variables", "previews", "faults", "fluxrace", "fleet"}, p)
		})
	case "converge":
		return slices.ContainsFunc(s.Phases, func(p string) bool { return p == "resync" || p == "drift" })
	}
	return false
}

// results are every figure of one run.
type results struct {
	Settings settings `json:"settings"`

	Workloads []workload `json:"workloads"`
	// What an unchanged periodic resync costs, per VidraResource reconciled.
	ResyncReconciles               float64 `json:"resyncReconciles"`
	ResyncMemberWritesPerReconcile float64 `json:"resyncMemberWritesPerReconcile"`
	ResyncHubWritesPerReconcile    float64 `json:"resyncHubWritesPerReconcile"`
	ResyncHubWrites                string  `json:"resyncHubWritesPerReconcileByKind"`

	EnrollP50Ms float64 `json:"enrollP50Ms"`
	EnrollP95Ms float64 `json:"enrollP95Ms"`
	DriftP50Ms  float64 `json:"driftP50Ms"`
	DriftP95Ms  float64 `json:"driftP95Ms"`

	IsolationUnpausedSeconds float64 `json:"isolationUnpausedSeconds"`
	IsolationPausedSeconds   float64 `json:"isolationPausedSeconds"`
	IsolationRatio           float64 `json:"isolationRatio"`
	// IsolationRatios are every round's.
	IsolationRatios []float64 `json:"isolationRatioByRound"`

	IdleRSSMiB      float64 `json:"idleRSSMiB"`
	IdleHeapMiB     float64 `json:"idleHeapMiB"`
	EnrolledHeapMiB float64 `json:"enrolledHeapMiB"`
	ConvergedRSSMiB float64 `json:"convergedRSSMiB"`
	// HeapPerWatchedKindMiB is what converging added to the heap per watched kind and
	// cluster, with that kind's objects: an upper bound of a drift watch's cost.
	HeapPerWatchedKindMiB  float64 `json:"heapPerWatchedKindMiB"`
	ObjectsPerCluster      int     `json:"objectsPerClusterConverged"`
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
	HeapAfterCyclesIdleMiB float64 `json:"heapAfterCyclesIdleMiB"`
	// Pull is the pull phase's, when it ran.
	Pull *pullResult `json:"pull,omitempty"`
	// Fleet is the fleet phase's, one per size, when it ran.
	Fleet []fleetResult `json:"fleet,omitempty"`
	// FleetSharded is the largest fleet on -fleet-replicas replicas, when they ran.
	FleetSharded *shardedResult `json:"fleetSharded,omitempty"`
	// Noisy is the noisy phase's, when it ran.
	Noisy *noisyResult `json:"noisy,omitempty"`
	// Hostile is the hostile phase's, when it ran.
	Hostile *hostileResult `json:"hostile,omitempty"`
	// Variables is the variables phase's, when it ran.
	Variables *variablesResult `json:"variables,omitempty"`
	// Previews are the previews phase's, one per size, when it ran.
	Previews                []previewsResult `json:"previews,omitempty"`
	Inventory               *inventoryResult `json:"inventory,omitempty"`
	Faults                  *faultsResult    `json:"faults,omitempty"`
	FluxRace                *fluxRaceResult  `json:"fluxRace,omitempty"`
	Targets                 []check          `json:"targets"`
	MeasuredAt              string           `json:"measuredAt"`
	IsolationObjectsPerSide int              `json:"isolationObjectsPerRound"`
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
	r.Targets = nil
	for _, w := range r.Workloads {
		r.Targets = append(r.Targets,
			check{w.Name + ": operator/limit", w.OperatorToLimit, ">= 0.6", w.OperatorToLimit >= 0.6},
			check{w.Name + ": member requests per object", w.MemberRequestsPerObject, "<= 1.1", w.MemberRequestsPerObject <= 1.1})
		if w.Name == "bulk" {
			r.Targets = append(r.Targets, check{w.Name + ": operator/Flux's engine", w.OperatorToFlux, ">= 1.5", w.OperatorToFlux >= 1.5})
		}
	}
	if r.ResyncReconciles > 0 {
		r.Targets = append(r.Targets,
			check{"resync: member writes per VidraResource", r.ResyncMemberWritesPerReconcile, "== 0", r.ResyncMemberWritesPerReconcile == 0},
			check{"resync: hub writes per VidraResource", r.ResyncHubWritesPerReconcile, "<= 1", r.ResyncHubWritesPerReconcile <= 1})
	}
	r.Targets = append(r.Targets, r.phaseTargets()...)
	if n := r.Noisy; n != nil {
		r.Targets = append(r.Targets,
			check{"noisy: beside bundles naming clusters that never come / quiet", n.UnknownServerMs / n.QuietMs, "<= 2", n.UnknownServerMs <= 2*n.QuietMs},
			check{"noisy: beside a member whose webhook holds every write / quiet", n.SlowWebhookMs / n.QuietMs, "<= 2", n.SlowWebhookMs <= 2*n.QuietMs},
			check{"noisy: an InfrahubSync beside syncs of a trickling Infrahub / quiet", n.SyncTricklingMs / n.SyncQuietMs, "<= 2", n.SyncTricklingMs <= 2*n.SyncQuietMs})
	}
	if h := r.Hostile; h != nil {
		r.Targets = append(r.Targets,
			check{"hostile: an InfrahubSync beside hostile sources / quiet", h.HostileMs / h.QuietMs, "<= 2", h.HostileMs <= 2*h.QuietMs},
			check{"hostile: operator peak RSS meanwhile (MiB)", h.PeakRSSMiB, "< chart limit / 2", h.PeakRSSMiB < h.ChartLimitMiB/2})
	}
	r.Targets = append(r.Targets, r.Variables.targets()...)
	r.Targets = append(r.Targets, previewsTargets(r.Previews)...)
	r.Targets = append(r.Targets, r.Inventory.targets()...)
	r.Targets = append(r.Targets, r.Faults.targets()...)
	r.Targets = append(r.Targets, r.FluxRace.targets()...)
	r.Targets = append(r.Targets, fleetTargets(r.Fleet, r.FleetSharded)...)
	if p := r.Pull; p != nil {
		// An idle agent costs the hub at most one watch and one heartbeat write per
		// --agent-heartbeat: at the default 30s, 4 requests a minute, and nothing else.
		r.Targets = append(r.Targets,
			check{"pull: idle hub requests per member per minute (30s heartbeat)", p.IdleRequestsPerMinuteAtDefault, "<= 4", p.IdleRequestsPerMinuteAtDefault <= 4},
			check{"pull: idle hub requests but watches and heartbeats, per member per minute", p.IdleOtherRequestsPerMinute, "== 0", p.IdleOtherRequestsPerMinute == 0})
	}
}

func (r *results) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	s := r.Settings
	fmt.Fprintf(tw, "\n%d members x %d VidraResources x %d objects, %d workers; each workload and its limit measured %d times (medians)\n\n", s.Members, s.Resources, s.Objects, s.Workers, s.Rounds)
	fmt.Fprintf(tw, "measure\tvalue\n")
	for _, w := range r.Workloads {
		objects := w.Members * w.Resources * w.Objects
		fmt.Fprintf(tw, "%s (%d x %d x %d)\t%.2f s, %.0f objects/s (%d objects); limit %.0f objects/s; operator/limit %.2f\n", w.Name, w.Members, w.Resources, w.Objects, w.Seconds, w.ObjectsPerSec, objects, w.LimitObjectsPerSec, w.OperatorToLimit)
		fmt.Fprintf(tw, "  by round\toperator %s objects/s; limit %s objects/s\n", rates(w.OperatorRates), rates(w.LimitRates))
		if len(w.SpreadLimitRates) > 0 {
			fmt.Fprintf(tw, "  spread limit\t%.0f objects/s (%s) with the same applies spread over every member at once; operator/spread limit %.2f (not a target)\n",
				w.SpreadLimitObjectsPerSec, rates(w.SpreadLimitRates), w.OperatorToSpreadLimit)
		}
		fmt.Fprintf(tw, "  Flux's engine\t%.0f objects/s (%s) applying the same bundles with ssa.ResourceManager.ApplyAllStaged, %.2f member requests per object; operator/Flux %.2f\n",
			w.FluxObjectsPerSec, rates(w.FluxRates), w.FluxMemberRequestsPerObject, w.OperatorToFlux)
		fmt.Fprintf(tw, "  Flux's CPU per 1000 objects\t%.2f s engine + %.2f s members' control planes\n", w.FluxCPUSecondsPer1000, w.FluxMembersCPUSecondsPer1000)
		fmt.Fprintf(tw, "  requests\t%.2f per object to the members (%s), %.1f hub writes per VidraResource (%s)\n", w.MemberRequestsPerObject, w.MemberRequests, w.HubWritesPerResource, w.HubWrites)
		fmt.Fprintf(tw, "  CPU per 1000 objects\t%.2f s operator + %.2f s members' control planes + %.2f s hub's; tight loop %.2f s + %.2f s members'\n",
			w.CPUSecondsPer1000, w.MembersCPUSecondsPer1000, w.HubCPUSecondsPer1000, w.LimitCPUSecondsPer1000, w.LimitMembersCPUSecondsPer1000)
	}
	if r.ResyncReconciles > 0 {
		which := ""
		if r.ResyncHubWrites != "" {
			which = " (" + r.ResyncHubWrites + ")"
		}
		fmt.Fprintf(tw, "unchanged resync\t%.0f reconciles: %.2f member writes, %.2f hub writes each%s\n", r.ResyncReconciles, r.ResyncMemberWritesPerReconcile, r.ResyncHubWritesPerReconcile, which)
	}
	r.printPhases(tw)
	if n := r.Noisy; n != nil {
		fmt.Fprintf(tw, "one team's bundle (%d objects) while another misbehaves\t%s\n", s.Objects, n.print())
	}
	if h := r.Hostile; h != nil {
		fmt.Fprintf(tw, "one team's sync (%d objects) beside hostile sources\t%s\n", s.Objects, h.print())
	}
	if p := r.Pull; p != nil {
		fmt.Fprintf(tw, "pull (%d clusters x %d VidraResources x %d objects)\t%s\n", p.Clusters, p.BundlesPerCluster, s.Objects, p.Setup)
		fmt.Fprintf(tw, "  idle agent's hub requests\t%.2f per member per minute at the default 30s heartbeat (%s); %.2f at %s, as counted over %s (%s)\n",
			p.IdleRequestsPerMinuteAtDefault, orNone(p.IdleRequestsPerMinuteAtDefaultByKind), p.IdleRequestsPerMinute, s.PullHeartbeat, s.PullIdle, orNone(p.IdleRequestsPerMinuteByKind))
		fmt.Fprintf(tw, "  hub writes meanwhile\t%.2f per member per minute at %s to the pull clusters' objects, by anyone (%s)\n", p.IdleHubWritesPerMinute, s.PullHeartbeat, orNone(p.IdleHubWritesPerMinuteByKind))
		fmt.Fprintf(tw, "  token renewals\tone per agent every %.0f min (%.0f min tokens, renewed at %.0f%% of their life): %.3f per member per minute, rarer than the window\n", p.TokenRenewalMinutes, p.TokenTTLMinutes, 100*p.TokenRenewalMinutes/p.TokenTTLMinutes, 1/p.TokenRenewalMinutes)
		fmt.Fprintf(tw, "  change to Ready\tp50 %.0f ms, p90 %.0f ms, max %.0f ms (%d changes, hub VidraResource changed -> hub Ready for its generation); %.2f agent requests to the hub per change (%s)\n",
			p.ChangeToReadyP50Ms, p.ChangeToReadyP90Ms, p.ChangeToReadyMaxMs, p.Changes, p.RequestsPerChange, orNone(p.RequestsPerChangeByKind))
	}
	if v := r.Variables; v != nil {
		fmt.Fprintf(tw, "variables (%d clusters, %d variable sets, %d objects)\t%s\n", v.Clusters, v.VariableSets, v.ObjectsPerBundle, v.print())
	}
	for _, p := range r.Previews {
		fmt.Fprintf(tw, "previews (%d clusters, %d objects)\t%s\n", p.Clusters, p.ObjectsPerBundle, p.print())
	}
	if i := r.Inventory; i != nil {
		fmt.Fprintf(tw, "inventory (%d Cluster API clusters)\t%s\n", i.Clusters, i.print())
	}
	if r.Faults != nil {
		r.Faults.print(tw)
	}
	if f := r.FluxRace; f != nil {
		fmt.Fprintf(tw, "fluxrace (%d clusters, %d objects, %d commits)\t%s\n", f.Clusters, f.ObjectsPerBundle, f.Rounds, f.print())
	}
	printFleet(tw, r.Fleet, r.FleetSharded)
	fmt.Fprintf(tw, "\ntarget\tvalue\twant\tmet\n")
	for _, c := range r.Targets {
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%v\n", c.Name, c.Value, c.Target, c.Met)
	}
	_ = tw.Flush()
}

// orNone is s, or "none".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func rates(values []float64) string { return joined(values, "%.0f") }

// ratios prints ratios with two decimals.
func ratios(values []float64) string { return joined(values, "%.2f") }

func joined(values []float64, format string) string {
	parts := make([]string, 0, len(values))
	for _, v := range values {
		parts = append(parts, fmt.Sprintf(format, v))
	}
	return strings.Join(parts, ", ")
}

func (r *results) write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644) //nolint:gosec // results are meant to be read
}
