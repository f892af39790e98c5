package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// measureFleet measures each fleet size of -fleet-clusters in turn, on a fresh operator,
// and then the smallest again (roundsAfterLargest).
func (b *bench) measureFleet(ctx context.Context, r *results) error {
	f := &fleetRun{bench: b}
	defer func() { _ = f.fronts.close() }()
	defer f.closeInfrahub()
	// The earlier phases' VidraResources would be reconciled by the fleet's fresh operator
	// in the middle of its figures: the fleet starts on a hub holding none.
	b.stopOperator()
	if err := f.clearVidraResources(ctx); err != nil {
		return fmt.Errorf("clear the earlier phases' VidraResources: %w", err)
	}
	for i, n := range b.FleetClusters {
		fmt.Fprintf(b.log, "  a fleet of %d clusters...\n", n)
		started := time.Now()
		fr, err := f.measureRounds(ctx, n, f.roundsBefore(i))
		if err != nil {
			return fmt.Errorf("%d clusters: %w", n, err)
		}
		fmt.Fprintf(b.log, "    measured in %s\n", since(started))
		r.Fleet = append(r.Fleet, fr)
		last := i == len(b.FleetClusters)-1
		if last && b.FleetReplicas > 1 {
			fmt.Fprintf(b.log, "  the fleet of %d clusters on %d replicas...\n", n, b.FleetReplicas)
			started := time.Now()
			sr, err := f.measureSharded(ctx)
			if err != nil {
				sr.Error = err.Error()
			}
			r.FleetSharded = &sr
			fmt.Fprintf(b.log, "    measured in %s\n", since(started))
		}
		if !last || f.roundsAfterLargest() > 0 {
			if err := f.clearSize(ctx, n); err != nil {
				return err
			}
		}
	}
	return f.measureAfterLargest(ctx, &r.Fleet[0])
}

// roundsBefore is how many times the i-th size is delivered before the next: for the
// smallest of several sizes, the base of the throughput ratio, the first half (rounded
// up) of -fleet-rounds; once for the others. The smallest's delivery is the shortest
// (half a minute at 100 clusters), short enough for a slow minute of a shared machine to
// move it by a third; the largest sizes last minutes.
func (f *fleetRun) roundsBefore(i int) int {
	if i == 0 && len(f.FleetClusters) > 1 {
		return f.FleetRounds - f.roundsAfterLargest()
	}
	return 1
}

// roundsAfterLargest is how many times the smallest of several sizes is delivered again
// once the largest has been measured: the other half of -fleet-rounds. A shared machine's
// speed drifts over the phase's quarter of an hour, by as much as a third; measured on
// both sides of the largest, the base of the ratio drifts with it.
func (f *fleetRun) roundsAfterLargest() int {
	if len(f.FleetClusters) < 2 {
		return 0
	}
	return f.FleetRounds / 2
}

// measureAfterLargest delivers the smallest size roundsAfterLargest times, each from
// nothing on a fresh operator, and keeps each round's delivery in small.
func (f *fleetRun) measureAfterLargest(ctx context.Context, small *fleetResult) error {
	rounds := f.roundsAfterLargest()
	for round := 1; round <= rounds; round++ {
		fmt.Fprintf(f.log, "  the fleet of %d clusters again, after the largest (%d of %d)...\n", small.Clusters, round, rounds)
		fr, err := f.measure(ctx, small.Clusters, false)
		if err != nil {
			return fmt.Errorf("%d clusters after the largest: %w", small.Clusters, err)
		}
		small.DeliveredAfterLargest = append(small.DeliveredAfterLargest, fr.fleetDelivery)
		fmt.Fprintf(f.log, "    %.0f objects/s\n", fr.ObjectsPerSecond)
		if round < rounds {
			if err := f.clearSize(ctx, small.Clusters); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearSize stops the operator and removes the fleet of n clusters just measured.
func (f *fleetRun) clearSize(ctx context.Context, n int) error {
	started := time.Now()
	f.stopOperator()
	if err := f.clear(ctx); err != nil {
		return fmt.Errorf("clear the fleet of %d clusters: %w", n, err)
	}
	fmt.Fprintf(f.log, "    cleared in %s\n", since(started))
	return nil
}

// measureRounds measures a fleet of n clusters rounds times, each from nothing on a fresh
// operator, the memory readings and the idle window in the last alone. The delivery's
// figures are the round's of the median throughput, the others the last round's.
func (f *fleetRun) measureRounds(ctx context.Context, n, rounds int) (fleetResult, error) {
	var deliveries []fleetDelivery
	for round := 1; round < rounds; round++ {
		fr, err := f.measure(ctx, n, false)
		if err != nil {
			return fr, err
		}
		deliveries = append(deliveries, fr.fleetDelivery)
		fmt.Fprintf(f.log, "    round %d of %d: %.0f objects/s\n", round, rounds, fr.ObjectsPerSecond)
		if err := f.clearSize(ctx, n); err != nil {
			return fr, err
		}
	}
	fr, err := f.measure(ctx, n, true)
	if err != nil || len(deliveries) == 0 {
		return fr, err
	}
	deliveries = append(deliveries, fr.fleetDelivery)
	for _, d := range deliveries {
		fr.ObjectsPerSecondByRound = append(fr.ObjectsPerSecondByRound, d.ObjectsPerSecond)
	}
	fr.fleetDelivery = medianDelivery(deliveries)
	return fr, nil
}

// medianDelivery is the delivery of the median throughput (of the lower middle two, for an
// even count): one round's figures, which belong together.
func medianDelivery(rounds []fleetDelivery) fleetDelivery {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b fleetDelivery) int { return cmp.Compare(a.ObjectsPerSecond, b.ObjectsPerSecond) })
	return sorted[(len(sorted)-1)/2]
}

// bracketed is a figure of the smallest size's delivery as the largest is compared with
// it: the mean of the median round's before the larger sizes and the median round's
// after the largest, or the first alone when none was delivered after.
func bracketed(small fleetResult, figure func(fleetDelivery) float64) float64 {
	before := figure(small.fleetDelivery)
	if len(small.DeliveredAfterLargest) == 0 {
		return before
	}
	return (before + figure(medianDelivery(small.DeliveredAfterLargest))) / 2
}

// since is the time since start, to the tenth of a second.
func since(start time.Time) time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
