package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

// fleetResult is what a fleet of one size cost: its clusters are fronts on the loopback
// range in front of the members' control planes (fronts.go), each with a delivery policy
// confining it to a namespace of its own, and each received BundlesPerCluster bundles of
// ObjectsPerBundle ConfigMaps from as many InfrahubSyncs (one artifact per cluster each,
// delivered to the cluster its target names). The operator is started afresh for each
// size, so every figure per cluster is a difference from its own start.
type fleetResult struct {
	Clusters          int `json:"clusters"`
	ControlPlanes     int `json:"controlPlanes"`
	BundlesPerCluster int `json:"bundlesPerCluster"`
	ObjectsPerBundle  int `json:"objectsPerBundle"`

	// Enrollment: each Secret created -> its VidraCluster Engaged; the total from the
	// first Secret created to the last cluster Engaged.
	EngageP50Ms        float64 `json:"engageP50Ms"`
	EngageP95Ms        float64 `json:"engageP95Ms"`
	EngageTotalSeconds float64 `json:"engageTotalSeconds"`

	// Delivery: the median round's when the size was delivered in several rounds
	// (-fleet-rounds); ObjectsPerSecondByRound are every round's before the larger
	// sizes, DeliveredAfterLargest the rounds delivered after the largest.
	fleetDelivery
	ObjectsPerSecondByRound []float64       `json:"objectsPerSecondByRound,omitempty"`
	DeliveredAfterLargest   []fleetDelivery `json:"deliveredAfterLargest,omitempty"`

	// Memory: at the operator's start (no fleet cluster), then per engaged cluster before
	// any bundle, and per idle cluster with its bundles delivered; HeapPerManagedObjectKiB
	// is what delivering added to the heap (its spans in use) per object now managed, and
	// LiveHeapPerManagedObjectKiB to the objects reachable in it. Both count each
	// cluster's cost of its first delivery (its connections, its mappings) as its
	// objects'; the Marginal figures do not: they are what the bundles after each
	// cluster's first added, per object they added. EventsHeap is the part of the live
	// heap's growth that the Events recorder holds: every Event of the delivery, kept six
	// to twelve minutes to fold repeats into series, which depends on the Events of the
	// last minutes rather than on the objects managed (the check of the heap per object
	// leaves it out; the figures include it). PeakRSSMiB is the most the operator's
	// resident set reached before it idled (enrolment and delivery).
	StartRSSMiB                   float64 `json:"startRSSMiB"`
	StartHeapMiB                  float64 `json:"startHeapMiB"`
	PeakRSSMiB                    float64 `json:"peakRSSMiB"`
	IdleRSSMiB                    float64 `json:"idleRSSMiB"`
	IdleHeapMiB                   float64 `json:"idleHeapMiB"`
	RSSPerEngagedClusterMiB       float64 `json:"rssPerEngagedClusterMiB"`
	HeapPerEngagedClusterMiB      float64 `json:"heapPerEngagedClusterMiB"`
	GoroutinesPerEngagedCluster   float64 `json:"goroutinesPerEngagedCluster"`
	RSSPerIdleClusterMiB          float64 `json:"rssPerIdleClusterMiB"`
	HeapPerIdleClusterMiB         float64 `json:"heapPerIdleClusterMiB"`
	GoroutinesPerIdleCluster      float64 `json:"goroutinesPerIdleCluster"`
	HeapPerManagedObjectKiB       float64 `json:"heapPerManagedObjectKiB"`
	LiveHeapPerManagedObjectKiB   float64 `json:"liveHeapPerManagedObjectKiB"`
	EventsHeapPerManagedObjectKiB float64 `json:"eventsHeapPerManagedObjectKiB"`
	// Measured when each cluster has more than one bundle.
	MarginalHeapPerManagedObjectKiB       float64 `json:"marginalHeapPerManagedObjectKiB,omitempty"`
	MarginalLiveHeapPerManagedObjectKiB   float64 `json:"marginalLiveHeapPerManagedObjectKiB,omitempty"`
	MarginalEventsHeapPerManagedObjectKiB float64 `json:"marginalEventsHeapPerManagedObjectKiB,omitempty"`

	// Idle: over IdleWindowSeconds with nothing changing, the operator's requests per
	// cluster per minute to the members (probes, watches, resync reads) and to the hub,
	// the operator's writes to the hub per minute, and every write the hub's API server
	// served meanwhile, by anyone (its own identity Lease, renewed every 10s, included).
	IdleWindowSeconds                float64 `json:"idleWindowSeconds"`
	IdleMemberRequestsPerClusterMin  float64 `json:"idleMemberRequestsPerClusterPerMinute"`
	IdleMemberRequests               string  `json:"idleMemberRequestsPerClusterPerMinuteByMethod"`
	IdleHubRequestsPerClusterMin     float64 `json:"idleHubRequestsPerClusterPerMinute"`
	IdleHubRequests                  string  `json:"idleHubRequestsPerClusterPerMinuteByMethod"`
	IdleOperatorHubWritesPerMinute   float64 `json:"idleOperatorHubWritesPerMinute"`
	IdleHubWritesPerMinute           float64 `json:"idleHubWritesPerMinute"`
	IdleHubWritesPerMinuteByResource string  `json:"idleHubWritesPerMinuteByResource"`
	// The idle fleet's CPU seconds per minute: the operator's, the hub's and the members'
	// API servers and etcds. A delivery pays this standing cost for as long as it lasts.
	IdleOperatorCPUSecondsPerMinute float64 `json:"idleOperatorCPUSecondsPerMinute"`
	IdleHubCPUSecondsPerMinute      float64 `json:"idleHubCPUSecondsPerMinute"`
	IdleMembersCPUSecondsPerMinute  float64 `json:"idleMembersCPUSecondsPerMinute"`
}

// fleetDelivery is what a fleet's delivery cost: from the InfrahubSyncs created to every
// bundle Ready.
type fleetDelivery struct {
	ReadySeconds             float64 `json:"readySeconds"`
	ObjectsPerSecond         float64 `json:"objectsPerSecond"`
	HubWritesPerBundle       float64 `json:"hubWritesPerBundle"`
	HubWrites                string  `json:"hubWritesPerBundleByKind"`
	MemberRequestsPerObject  float64 `json:"memberRequestsPerObject"`
	MemberRequests           string  `json:"memberRequestsPerObjectByMethod"`
	CPUSecondsPer1000Objects float64 `json:"operatorCPUSecondsPer1000Objects"`
	// ReconcilesPerBundle are the operator's VidraResource reconciles meanwhile, per
	// bundle (Reconciles: by result); HubCPU and MembersCPU are the CPU time of the hub's
	// and the members' API servers and etcds per 1,000 objects.
	ReconcilesPerBundle float64 `json:"reconcilesPerBundle"`
	Reconciles          string  `json:"reconcilesPerBundleByResult"`
	// HubLists are the LISTs and WATCHes the hub served during the delivery, by anyone
	// (the bench's own watch of the VidraResources too), by resource: each is as large as
	// what it lists, which grows with the fleet.
	HubLists string `json:"hubListsDuringDelivery"`
	// LargestSyncKiB is the largest InfrahubSync as the hub stores it once delivered, its
	// status of one artifact per cluster and its managed fields included: an object on
	// the hub holds at most 1.5 MiB.
	LargestSyncKiB                  float64 `json:"largestSyncKiB"`
	HubCPUSecondsPer1000Objects     float64 `json:"hubCPUSecondsPer1000Objects"`
	MembersCPUSecondsPer1000Objects float64 `json:"membersCPUSecondsPer1000Objects"`
	fleetCollector
}

// fleetCollector is what the operator's garbage collector did during a delivery. A
// cycle marks the live heap, which grows with the fleet; the cycles come every half of
// the live heap allocated (GOGC 50), so the marking per object should not grow.
type fleetCollector struct {
	GCCyclesPer1000Objects float64 `json:"operatorGCCyclesPer1000Objects"`
	AllocatedKiBPerObject  float64 `json:"operatorAllocatedKiBPerObject"`
	// LiveHeapMiB is the heap the delivery's last cycle found live.
	LiveHeapMiB float64 `json:"operatorLiveHeapMiB"`
}

// collectorOf is the collector's delta gc over a delivery of objects.
func collectorOf(gc collector, objects float64) fleetCollector {
	return fleetCollector{GCCyclesPer1000Objects: gc.cycles / objects * 1000, AllocatedKiBPerObject: gc.allocatedBytes / 1024 / objects, LiveHeapMiB: gc.liveBytes / (1 << 20)}
}

// fleetRun is the fleet phase's state: the fronts, kept from one size to the next.
type fleetRun struct {
	*bench
	fronts fronts
	// addresses are the fronts' "host:port", by cluster index.
	addresses []string
	// clusters are the size being measured, which clear removes.
	clusters []fleetCluster
	// infrahub serves the artifacts of the size being measured, until the next size
	// starts or the phase ends: an idle fleet whose source has gone would be measured
	// retrying it.
	infrahub *infrahubtest.Server
}

func (f *fleetRun) closeInfrahub() {
	if f.infrahub != nil {
		f.infrahub.Close()
	}
}

// measure enrolls n clusters on a fresh operator, delivers their bundles, lets them idle,
// and measures each step. A round kept for its delivery alone (not whole) skips the
// memory readings and the idle window: their pauses are a minute of the phase on a slow
// machine, for figures the last round gives.
func (f *fleetRun) measure(ctx context.Context, n int, whole bool) (fleetResult, error) {
	fr := fleetResult{Clusters: n, ControlPlanes: len(f.members), BundlesPerCluster: f.FleetBundles, ObjectsPerBundle: f.Objects}
	if err := f.restartOperator(ctx, fmt.Sprintf("fleet-%d", n), f.FleetResync); err != nil {
		return fr, err
	}
	clusters, err := f.prepare(ctx, n)
	if err != nil {
		return fr, err
	}
	f.clusters = clusters
	if !whole {
		if err := f.enrollAll(ctx, clusters, &fr); err != nil {
			return fr, err
		}
		_, err := f.deliverAll(ctx, clusters, &fr, false)
		return fr, err
	}
	start, err := f.settled(ctx, fmt.Sprintf("fleet-%d-start", n))
	if err != nil {
		return fr, err
	}
	fr.StartRSSMiB, fr.StartHeapMiB = start.rssMiB, start.heapMiB
	if err := f.enrollAll(ctx, clusters, &fr); err != nil {
		return fr, err
	}
	engaged, err := f.settled(ctx, fmt.Sprintf("fleet-%d-engaged", n))
	if err != nil {
		return fr, err
	}
	perCluster := func(m memory) (rss, heap, goroutines float64) {
		return (m.rssMiB - start.rssMiB) / float64(n), (m.heapMiB - start.heapMiB) / float64(n), (m.goroutines - start.goroutines) / float64(n)
	}
	fr.RSSPerEngagedClusterMiB, fr.HeapPerEngagedClusterMiB, fr.GoroutinesPerEngagedCluster = perCluster(engaged)
	first, err := f.deliverAll(ctx, clusters, &fr, true)
	if err != nil {
		return fr, err
	}
	idle, err := f.settled(ctx, fmt.Sprintf("fleet-%d-idle", n))
	if err != nil {
		return fr, err
	}
	fr.IdleRSSMiB, fr.IdleHeapMiB, fr.PeakRSSMiB = idle.rssMiB, idle.heapMiB, idle.peakRSSMiB
	fr.RSSPerIdleClusterMiB, fr.HeapPerIdleClusterMiB, fr.GoroutinesPerIdleCluster = perCluster(idle)
	perObject := func(from memory, bundles int) (heap, live, events float64) {
		kib := func(mib float64) float64 { return mib * 1024 / float64(n*bundles*f.Objects) }
		return kib(idle.heapMiB - from.heapMiB), kib(idle.liveHeapMiB - from.liveHeapMiB), kib(idle.eventsHeapMiB - from.eventsHeapMiB)
	}
	fr.HeapPerManagedObjectKiB, fr.LiveHeapPerManagedObjectKiB, fr.EventsHeapPerManagedObjectKiB = perObject(engaged, f.FleetBundles)
	if first != nil {
		fr.MarginalHeapPerManagedObjectKiB, fr.MarginalLiveHeapPerManagedObjectKiB, fr.MarginalEventsHeapPerManagedObjectKiB = perObject(*first, f.FleetBundles-1)
	}
	return fr, f.measureIdleFleet(ctx, clusters, &fr)
}

// deliverAll creates the InfrahubSyncs of the fleet's bundles and times them until every
// bundle is Ready, counting what that cost. With more than one bundle per cluster, the
// first sync's are delivered alone and the operator's memory measured (first) before the
// others are created, off the clock: what the rest then add is what objects cost, each
// cluster's first-delivery costs apart. (The counters include that pause: a garbage
// collection and a heap profile, a fraction of a percent of the delivery's CPU.) Without
// measureFirst the first sync's bundles are still delivered first, so that every round
// delivers alike, but nothing is measured between.
func (f *fleetRun) deliverAll(ctx context.Context, clusters []fleetCluster, fr *fleetResult, measureFirst bool) (first *memory, err error) {
	f.closeInfrahub()
	f.infrahub = infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	arts := make([]infrahubtest.Artifact, 0, len(clusters)*f.FleetBundles)
	for _, c := range clusters {
		for k := range f.FleetBundles {
			arts = append(arts, infrahubtest.Artifact{
				ID: fmt.Sprintf("art-%d-%s", k, c.name), Name: fleetArtifact(k), Content: c.bundle(k, f.Objects),
				TargetID: "site-" + c.name, TargetLabel: c.name, TargetKind: "LocationSite",
				DefinitionID: fmt.Sprintf("def-%d", k), DefinitionName: fleetArtifact(k),
			})
		}
	}
	f.infrahub.Put("main", arts...)
	before, err := f.fleetCounters(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	bundles := len(clusters) * f.FleetBundles
	syncs := 0
	if f.FleetBundles > 1 {
		if err := f.createSyncs(ctx, 0, 1); err != nil {
			return nil, err
		}
		if err := f.waitReadyCount(ctx, vidrav1alpha1.InfrahubSyncLabel, len(clusters), 30*time.Minute); err != nil {
			return nil, err
		}
		syncs = 1
		if measureFirst {
			paused := time.Now()
			m, err := f.settled(ctx, fmt.Sprintf("fleet-%d-first", len(clusters)))
			if err != nil {
				return nil, err
			}
			first = &m
			start = start.Add(time.Since(paused))
		}
	}
	if err := f.createSyncs(ctx, syncs, f.FleetBundles); err != nil {
		return nil, err
	}
	if f.profiler != nil {
		// Profiled from half way: the steady delivery, not the syncs' first fan-out.
		if err := f.waitReadyCount(ctx, vidrav1alpha1.InfrahubSyncLabel, bundles/2, 30*time.Minute); err != nil {
			return nil, err
		}
		f.startProfiles(ctx, fmt.Sprintf("fleet-%d-deliver", len(clusters)))
		defer f.waitProfiles()
	}
	if err := f.waitReadyCount(ctx, vidrav1alpha1.InfrahubSyncLabel, bundles, 30*time.Minute); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	f.writeOwnHeap(fmt.Sprintf("fleet-%d-deliver", len(clusters)))
	after, err := f.fleetCounters(ctx)
	if err != nil {
		return nil, err
	}
	objects := float64(bundles * f.Objects)
	fr.ReadySeconds = elapsed.Seconds()
	fr.ObjectsPerSecond = objects / elapsed.Seconds()
	writes := after.hubWrites.since(before.hubWrites)
	fr.HubWritesPerBundle, fr.HubWrites = writes.total()/float64(bundles), writes.per(float64(bundles))
	fr.HubLists = after.hubLists.since(before.hubLists).per(1)
	members := after.memberRequests(clusters).since(before.memberRequests(clusters))
	fr.MemberRequestsPerObject, fr.MemberRequests = members.total()/objects, members.per(objects)
	fr.CPUSecondsPer1000Objects, fr.HubCPUSecondsPer1000Objects, fr.MembersCPUSecondsPer1000Objects = after.cpuSince(before, objects/1000)
	reconciles := after.operator.since(before.operator)
	fr.ReconcilesPerBundle, fr.Reconciles = reconciles.reconciles/float64(bundles), reconciles.results.per(float64(bundles))
	fr.fleetCollector = collectorOf(reconciles.gc, objects)
	fr.LargestSyncKiB, err = f.largestSyncKiB(ctx)
	return first, err
}

// largestSyncKiB is the largest InfrahubSync's JSON as the hub serves it, in KiB.
func (f *fleetRun) largestSyncKiB(ctx context.Context) (float64, error) {
	syncs := &unstructured.UnstructuredList{}
	syncs.SetGroupVersionKind(vidrav1alpha1.GroupVersion.WithKind("InfrahubSyncList"))
	if err := f.fleet.Hub.Client.List(ctx, syncs); err != nil {
		return 0, fmt.Errorf("list InfrahubSyncs: %w", err)
	}
	largest := 0
	for _, s := range syncs.Items {
		data, err := json.Marshal(s.Object)
		if err != nil {
			return 0, err
		}
		largest = max(largest, len(data))
	}
	return float64(largest) / 1024, nil
}

// createSyncs creates the InfrahubSyncs of bundles from to until, each delivering its
// artifacts to the clusters they target.
func (f *fleetRun) createSyncs(ctx context.Context, from, until int) error {
	dest := vidrav1alpha1.InfrahubSyncDestination{ClusterFromTarget: true}
	for k := from; k < until; k++ {
		if err := f.fleet.Hub.Client.Create(ctx, infrahubSync(fleetArtifact(k), f.infrahub.URL(), fleetArtifact(k), dest)); err != nil {
			return fmt.Errorf("create InfrahubSync %s: %w", fleetArtifact(k), err)
		}
	}
	return nil
}

// fleetArtifact is the name of the k-th bundle's artifacts, one per cluster.
func fleetArtifact(k int) string { return fmt.Sprintf("%s%d", fleetArtifactPrefix, k) }

// fleetArtifactPrefix begins the name of every fleet bundle's artifacts and InfrahubSync.
const fleetArtifactPrefix = "fleet-bundle-"

// measureIdleFleet counts, over -fleet-idle with nothing changing, the operator's
// requests to the fleet's clusters and to the hub, the hub's writes and everyone's CPU;
// with -profile, it records CPU profiles from the window's start.
func (f *fleetRun) measureIdleFleet(ctx context.Context, clusters []fleetCluster, fr *fleetResult) error {
	before, err := f.fleetCounters(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	// The idle fleet's standing CPU, profiled: what the operator and the hub do with
	// nothing to deliver.
	f.startProfiles(ctx, fmt.Sprintf("fleet-%d-idle", len(clusters)))
	defer f.waitProfiles()
	select {
	case <-time.After(f.FleetIdle):
	case <-ctx.Done():
		return ctx.Err()
	}
	after, err := f.fleetCounters(ctx)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	minutes := elapsed.Minutes()
	perClusterMinute := float64(len(clusters)) * minutes
	fr.IdleWindowSeconds = elapsed.Seconds()
	members := after.memberRequests(clusters).since(before.memberRequests(clusters))
	fr.IdleMemberRequestsPerClusterMin, fr.IdleMemberRequests = members.total()/perClusterMinute, members.per(perClusterMinute)
	hub := after.operator.requests[hostOf(f.fleet.Hub)].since(before.operator.requests[hostOf(f.fleet.Hub)])
	fr.IdleHubRequestsPerClusterMin, fr.IdleHubRequests = hub.total()/perClusterMinute, hub.per(perClusterMinute)
	fr.IdleOperatorHubWritesPerMinute = (hub.total() - hub["GET"]) / minutes
	writes := after.hubWrites.since(before.hubWrites)
	fr.IdleHubWritesPerMinute, fr.IdleHubWritesPerMinuteByResource = writes.total()/minutes, writes.per(minutes)
	fr.IdleOperatorCPUSecondsPerMinute, fr.IdleHubCPUSecondsPerMinute, fr.IdleMembersCPUSecondsPerMinute = after.cpuSince(before, minutes)
	return nil
}
