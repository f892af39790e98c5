package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// Requeues nobody reads any more never hold the operator's stop: those of VidraResources
// (a slot's wake-up, a cluster gained) and those of enrollment Secrets (a cluster gained).
// Each was a send on a buffered channel that waited for ever once the buffer was full and
// its controller had stopped: a replica that had just gained hundreds of clusters took
// the manager's whole grace period to stop. The drift watches also stop beside the
// VidraResource controller, on the leader alone or, sharded, on every replica; sharded,
// they used to wait for the leader's runnables, which stop after the controller's.
// (A controller's queue could hold it too, a worker left waiting on controller-runtime's
// priority queue once shut down: internal/runtime/ctrlqueue's test reproduces that race.)
func TestRequeuesDoNotHoldTheStop(t *testing.T) {
	// Well below the manager's grace period of 30s, which ends a held stop; a stop takes
	// about a second.
	const stopWithin = 20 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleet, err := testfleet.Start(ctx, testfleet.Options{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	member := fleet.Members[0]
	if err := testoperator.CreateEnrollments(ctx, fleet.Hub, member); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, sharded := range []bool{false, true} {
		opCtx, stop := context.WithCancel(ctx)
		op, err := testoperator.Start(opCtx, fleet, testoperator.Options{Configure: func(o *operator.Options) {
			o.Sharding, o.ShardID = sharded, "replica-0"
		}})
		if err != nil {
			stop()
			t.Fatal(err)
		}
		if got := op.Watches.NeedLeaderElection(); got == sharded {
			t.Errorf("sharded %v: the drift watches need leader election %v, the controller %v", sharded, got, !sharded)
		}
		select {
		case <-op.Manager.GetLocalManager().Elected():
		case <-time.After(time.Minute):
			t.Fatalf("sharded %v: the operator was not elected", sharded)
		}
		err = testfleet.WaitFor(ctx, 100*time.Millisecond, time.Minute, "member engaged", func() (bool, error) {
			_, err := op.Provider.Get(ctx, multicluster.ClusterName(member.Name))
			return err == nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// More requeues than the buffers hold, still being sent when the operator stops,
		// each of a name of its own: thousands of keys ready in the controller's queue, as
		// in a replica that has just taken clusters over.
		requeued := make(chan struct{})
		go func() {
			defer close(requeued)
			for i := range 5000 {
				op.Watches.Requeue(fmt.Sprintf("absent-%d", i))
				op.Provider.ClusterGained(multicluster.ClusterName(member.Name))
			}
		}()
		stop()
		select {
		case <-op.Stopped:
		case <-time.After(stopWithin):
			t.Fatalf("sharded %v: the operator had not stopped %s after its context ended (its grace period is 30s)", sharded, stopWithin)
		}
		select {
		case <-requeued:
		case <-time.After(time.Minute):
			t.Fatalf("sharded %v: requeues still wait after the operator stopped", sharded)
		}
	}
}
