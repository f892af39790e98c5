package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// sizes parses "100,300,1000".
func sizes(list string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("fleet size %q: want a positive number", part)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// fleetTargets are the fleet phase's targets, each size's, and the largest size's
// throughput against the smallest's.
func fleetTargets(fleet []fleetResult, sharded *shardedResult) []check {
	var checks []check
	for _, f := range fleet {
		at := fmt.Sprintf("fleet of %d: ", f.Clusters)
		idle := f.IdleMemberRequestsPerClusterMin + f.IdleHubRequestsPerClusterMin
		heapPerObject := f.HeapPerManagedObjectKiB - f.EventsHeapPerManagedObjectKiB
		if f.MarginalHeapPerManagedObjectKiB != 0 {
			// An object's cost, not its cluster's: that is checked per cluster.
			heapPerObject = f.MarginalHeapPerManagedObjectKiB - f.MarginalEventsHeapPerManagedObjectKiB
		}
		checks = append(checks,
			check{at + "heap per managed object, the Events recorder's apart (KiB)", heapPerObject, "<= 2", heapPerObject <= 2},
			check{at + "every cluster Engaged (s)", f.EngageTotalSeconds, "<= 60", f.EngageTotalSeconds <= 60},
			check{at + "RSS per engaged cluster (MiB)", f.RSSPerEngagedClusterMiB, "<= 1", f.RSSPerEngagedClusterMiB <= 1},
			check{at + "goroutines per idle cluster", f.GoroutinesPerIdleCluster, "<= 10", f.GoroutinesPerIdleCluster <= 10},
			check{at + "requests per idle cluster per minute", idle, "<= 2", idle <= 2},
			check{at + "idle operator's hub writes per minute", f.IdleOperatorHubWritesPerMinute, "== 0", f.IdleOperatorHubWritesPerMinute == 0})
	}
	if sharded != nil {
		at := fmt.Sprintf("fleet of %d on %d replicas: ", sharded.Clusters, sharded.Replicas)
		bound := sharded.LeaseDurationSeconds + 15
		done := sharded.Error == ""
		checks = append(checks,
			check{at + "largest distance from an even share", sharded.Spread, "<= 0.1", done && sharded.Spread <= 0.1},
			check{at + "a killed replica's clusters taken over (s)", sharded.TakeoverSeconds, fmt.Sprintf("<= %.0f", bound), done && sharded.TakeoverSeconds <= bound})
	}
	if len(fleet) > 1 {
		small, large := fleet[0], fleet[len(fleet)-1]
		ratio := large.ObjectsPerSecond / bracketed(small, objectsPerSecond)
		checks = append(checks, check{fmt.Sprintf("fleet: throughput at %d / at %d clusters", large.Clusters, small.Clusters), ratio, ">= 0.8", ratio >= 0.8})
	}
	return checks
}

// printFleet adds the fleet phase's figures, one block per size, to the table, and the
// sharded fleet's.
func printFleet(w io.Writer, fleet []fleetResult, sharded *shardedResult) {
	defer printSharded(w, sharded)
	defer printFleetGrowth(w, fleet)
	for _, f := range fleet {
		objects := f.Clusters * f.BundlesPerCluster * f.ObjectsPerBundle
		fmt.Fprintf(w, "fleet of %d clusters\t%d fronts on 127.77.0.0/16 over %d control planes; %d bundles x %d objects each, from %d InfrahubSyncs (clusterFromTarget)\n",
			f.Clusters, f.Clusters, f.ControlPlanes, f.BundlesPerCluster, f.ObjectsPerBundle, f.BundlesPerCluster)
		fmt.Fprintf(w, "  enroll\tp50 %.0f ms, p95 %.0f ms per cluster; all %d Engaged %.1f s after the first Secret\n", f.EngageP50Ms, f.EngageP95Ms, f.Clusters, f.EngageTotalSeconds)
		fmt.Fprintf(w, "  deliver\t%.1f s from the syncs to every bundle Ready, %.0f objects/s (%d objects); %.2f hub writes per bundle (%s); %.2f member requests per object (%s); %.2f s operator CPU per 1000 objects\n",
			f.ReadySeconds, f.ObjectsPerSecond, objects, f.HubWritesPerBundle, f.HubWrites, f.MemberRequestsPerObject, f.MemberRequests, f.CPUSecondsPer1000Objects)
		printRounds(w, f)
		fmt.Fprintf(w, "  work\t%.2f reconciles per bundle (%s); CPU per 1000 objects: hub %.2f s, members %.2f s; the largest InfrahubSync on the hub %.0f KiB (of 1536 an object may hold); the hub's lists and watches meanwhile, by anyone: %s\n",
			f.ReconcilesPerBundle, f.Reconciles, f.HubCPUSecondsPer1000Objects, f.MembersCPUSecondsPer1000Objects, f.LargestSyncKiB, orNone(f.HubLists))
		fmt.Fprintf(w, "  collector\tthe operator allocated %.0f KiB per object; its garbage collector ran %.1f cycles per 1000 objects and found %.0f MiB live at the last\n",
			f.AllocatedKiBPerObject, f.GCCyclesPer1000Objects, f.LiveHeapMiB)
		fmt.Fprintf(w, "  memory\t%.1f MiB RSS, %.1f MiB heap at start; %.1f MiB RSS at most; %.1f MiB RSS, %.1f MiB heap idle\n", f.StartRSSMiB, f.StartHeapMiB, f.PeakRSSMiB, f.IdleRSSMiB, f.IdleHeapMiB)
		fmt.Fprintf(w, "  per engaged cluster\t%.3f MiB RSS, %.3f MiB heap, %.1f goroutines (before its bundles)\n", f.RSSPerEngagedClusterMiB, f.HeapPerEngagedClusterMiB, f.GoroutinesPerEngagedCluster)
		fmt.Fprintf(w, "  per idle cluster\t%.3f MiB RSS, %.3f MiB heap, %.1f goroutines (with its bundles); %.2f KiB heap (%.2f KiB live, of which the Events recorder's %.2f) per managed object\n",
			f.RSSPerIdleClusterMiB, f.HeapPerIdleClusterMiB, f.GoroutinesPerIdleCluster, f.HeapPerManagedObjectKiB, f.LiveHeapPerManagedObjectKiB, f.EventsHeapPerManagedObjectKiB)
		if f.MarginalHeapPerManagedObjectKiB != 0 {
			fmt.Fprintf(w, "  per object after the first bundle\t%.2f KiB heap (%.2f KiB live, of which the Events recorder's %.2f) per object the other bundles added\n",
				f.MarginalHeapPerManagedObjectKiB, f.MarginalLiveHeapPerManagedObjectKiB, f.MarginalEventsHeapPerManagedObjectKiB)
		}
		fmt.Fprintf(w, "  idle, over %.0f s\t%.2f requests per cluster per minute to its member (%s), %.2f to the hub (%s); the operator's hub writes %.2f per minute; the hub's writes by anyone %.2f per minute (%s)\n",
			f.IdleWindowSeconds, f.IdleMemberRequestsPerClusterMin, orNone(f.IdleMemberRequests), f.IdleHubRequestsPerClusterMin, orNone(f.IdleHubRequests),
			f.IdleOperatorHubWritesPerMinute, f.IdleHubWritesPerMinute, orNone(f.IdleHubWritesPerMinuteByResource))
		fmt.Fprintf(w, "  idle CPU\t%.2f s per minute by the operator, %.2f by the hub, %.2f by the members: %.0f%% of the delivery's CPU at that rate over its %.0f s\n",
			f.IdleOperatorCPUSecondsPerMinute, f.IdleHubCPUSecondsPerMinute, f.IdleMembersCPUSecondsPerMinute, standingShare(f)*100, f.ReadySeconds)
	}
}

func printSharded(w io.Writer, s *shardedResult) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "fleet of %d on %d replicas\t--sharding, --shard-lease-duration %.0fs, in place of the one operator, the fleet delivered\n", s.Clusters, s.Replicas, s.LeaseDurationSeconds)
	fmt.Fprintf(w, "  split\t%.1f s from the replicas' start to every fence held as hashed; clusters per replica %v (%.1f%% from an even share at most)\n",
		s.SplitSeconds, s.ClustersPerReplica, s.Spread*100)
	fmt.Fprintf(w, "  leases\t%.0f requests on Leases during the split; idle, %.1f a minute (%s)\n",
		s.SplitLeaseRequests, s.IdleLeaseRequestsPerMinute, orNone(s.IdleLeaseRequests))
	fmt.Fprintf(w, "  failover\t%.1f s from a replica killed to its clusters' fences held by the survivors\n", s.TakeoverSeconds)
	if s.Error != "" {
		fmt.Fprintf(w, "  failed\t%s\n", s.Error)
	}
}

// standingShare is the part of the delivery's CPU (operator, hub and members) that the
// idle fleet would have spent over the same time: the cost of a cluster rather than of
// an object, which a longer delivery pays for longer.
func standingShare(f fleetResult) float64 {
	objects := float64(f.Clusters * f.BundlesPerCluster * f.ObjectsPerBundle)
	delivery := (f.CPUSecondsPer1000Objects + f.HubCPUSecondsPer1000Objects + f.MembersCPUSecondsPer1000Objects) * objects / 1000
	if delivery == 0 {
		return 0
	}
	idle := (f.IdleOperatorCPUSecondsPerMinute + f.IdleHubCPUSecondsPerMinute + f.IdleMembersCPUSecondsPerMinute) * f.ReadySeconds / 60
	return idle / delivery
}

// joinRates is "258, 271, 266".
func joinRates(rates []float64) string {
	shown := make([]string, len(rates))
	for i, r := range rates {
		shown[i] = fmt.Sprintf("%.0f", r)
	}
	return strings.Join(shown, ", ")
}

// printFleetGrowth says how the largest size's throughput and CPU per object compare to
// the smallest's: on a machine whose cores every component shares, the throughput follows
// the sum of their CPU per object, which says which of them grew.
func printFleetGrowth(w io.Writer, fleet []fleetResult) {
	if len(fleet) < 2 {
		return
	}
	small, large := fleet[0], fleet[len(fleet)-1]
	all := func(d fleetDelivery) float64 {
		return d.CPUSecondsPer1000Objects + d.HubCPUSecondsPer1000Objects + d.MembersCPUSecondsPer1000Objects
	}
	grown := func(figure func(fleetDelivery) float64) float64 {
		return figure(large.fleetDelivery) / bracketed(small, figure)
	}
	fmt.Fprintf(w, "fleet of %d against %d\tthroughput %.2f times; CPU per object %.2f times the operator's (its allocations per object %.2f times), %.2f the hub's, %.2f the members', %.2f in all\n",
		large.Clusters, small.Clusters, grown(objectsPerSecond),
		grown(func(d fleetDelivery) float64 { return d.CPUSecondsPer1000Objects }),
		grown(func(d fleetDelivery) float64 { return d.AllocatedKiBPerObject }),
		grown(func(d fleetDelivery) float64 { return d.HubCPUSecondsPer1000Objects }),
		grown(func(d fleetDelivery) float64 { return d.MembersCPUSecondsPer1000Objects }), grown(all))
}

func objectsPerSecond(d fleetDelivery) float64 { return d.ObjectsPerSecond }

// printRounds says what each round of a size delivered, when it was delivered more than
// once.
func printRounds(w io.Writer, f fleetResult) {
	if len(f.ObjectsPerSecondByRound) > 1 {
		fmt.Fprintf(w, "  rounds\t%s objects/s delivered in %d rounds, each from nothing: the delivery's figures are the median round's, the others the last round's\n",
			joinRates(f.ObjectsPerSecondByRound), len(f.ObjectsPerSecondByRound))
	}
	if len(f.DeliveredAfterLargest) == 0 {
		return
	}
	after := medianDelivery(f.DeliveredAfterLargest)
	rates := make([]float64, len(f.DeliveredAfterLargest))
	for i, d := range f.DeliveredAfterLargest {
		rates[i] = d.ObjectsPerSecond
	}
	fmt.Fprintf(w, "  after the largest\t%s objects/s delivered again once the largest size was measured; CPU per 1000 objects: operator %.2f s, hub %.2f s, members %.2f s; the largest is compared with the mean of before and after: %.0f objects/s\n",
		joinRates(rates), after.CPUSecondsPer1000Objects, after.HubCPUSecondsPer1000Objects, after.MembersCPUSecondsPer1000Objects, bracketed(f, objectsPerSecond))
}
