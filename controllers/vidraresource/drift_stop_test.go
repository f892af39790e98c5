package vidraresource_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/vidra-operator/vidra/controllers/vidraresource"
)

// Once the watches have stopped, with the controller that reads their requeues, a requeue
// beyond the buffer returns rather than waiting for ever (operator's
// TestRequeuesDoNotHoldTheStop shows the whole operator stopping).
func TestRequeuesAfterTheWatchesStopAreDropped(t *testing.T) {
	w := vidraresource.NewDriftWatches(logr.Discard(), hubID)
	ctx, stop := context.WithCancel(t.Context())
	started := make(chan error, 1)
	go func() { started <- w.Start(ctx) }()

	// Nobody reads the requeues, as after the controller stopped: more than the buffer holds.
	requeued := make(chan struct{})
	go func() {
		for i := range 5000 {
			w.Requeue("vr-" + string(rune('a'+i%26)))
		}
		close(requeued)
	}()
	select {
	case <-requeued:
		t.Fatal("5,000 requeues went through with nobody reading them: the test does not fill the buffer")
	case <-time.After(200 * time.Millisecond):
	}

	stop()
	select {
	case <-requeued:
	case <-time.After(30 * time.Second):
		t.Fatal("requeues still wait after the watches stopped")
	}
	if err := <-started; err != nil {
		t.Fatalf("Start: %v", err)
	}
	// Requeues after the stop return at once too.
	w.Requeue("late")
}
