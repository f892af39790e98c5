package ctrlqueue_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vidra-operator/vidra/internal/runtime/ctrlqueue"
)

func newQueue(t *testing.T) priorityqueue.PriorityQueue[reconcile.Request] {
	t.Helper()
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, time.Second)
	q, ok := ctrlqueue.Requests()(t.Name(), limiter).(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		t.Fatal("the queue is not a priority queue: controller-runtime would wrap it and lose the priorities")
	}
	return q
}

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

// TestWorkersLeaveAShutDownQueue runs workers as a controller's do, adding keys as
// reconciles requeue them, and shuts the queue down under them, round after round: every
// worker must leave. controller-runtime v0.24.1's queue alone leaves one waiting for ever
// within a few rounds.
func TestWorkersLeaveAShutDownQueue(t *testing.T) {
	const rounds, workers = 100, 20
	for round := range rounds {
		q := newQueue(t)
		var wg sync.WaitGroup
		woken := make(chan string, workers)
		for range workers {
			wg.Go(func() {
				for {
					key := request(fmt.Sprintf("obj-%d", rand.IntN(1000)))
					switch rand.IntN(3) {
					case 0:
						q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(rand.IntN(3))}, key)
					case 1:
						q.AddAfter(key, time.Duration(rand.IntN(3))*time.Millisecond)
					default:
						q.AddRateLimited(key)
					}
					item, _, shutdown := q.GetWithPriority()
					if shutdown {
						return
					}
					if strings.HasPrefix(item.Name, "ctrlqueue:") {
						woken <- item.Name
					}
					q.Done(item)
				}
			})
		}
		time.Sleep(5 * time.Millisecond)
		// ShutDown waits for the workers it wakes, at most 10s before it falls back to
		// controller-runtime's shutdown, which may leave one waiting: it must not need to.
		if !returnsWithin(5*time.Second, q.ShutDown) {
			t.Fatalf("round %d: ShutDown still waits for the workers it woke", round)
		}
		if !returnsWithin(30*time.Second, wg.Wait) {
			t.Fatalf("round %d: a worker is still waiting on the shut-down queue", round)
		}
		select {
		case name := <-woken:
			t.Fatalf("round %d: the wake-up key %s was handed out as work", round, name)
		default:
		}
	}
}

// returnsWithin reports whether f returned within d (it is left running if not).
func returnsWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestQueueKeepsItsPrioritiesAndStops: before its shutdown the queue is controller-runtime's
// (the higher priority first, keys de-duplicated); after it, Get, Done and Len return at once.
func TestQueueKeepsItsPrioritiesAndStops(t *testing.T) {
	q := newQueue(t)
	q.Add(request("low"))
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(1)}, request("high"), request("high"))
	for _, want := range []string{"high", "low"} {
		item, _, shutdown := q.GetWithPriority()
		if shutdown || item.Name != want {
			t.Fatalf("got %v (shutdown %t), want %s", item, shutdown, want)
		}
		q.Done(item)
	}
	q.Add(request("held"))
	held, _ := q.Get()
	q.ShutDown()
	q.ShutDown()
	if !q.ShuttingDown() {
		t.Fatal("the queue does not say it is shutting down")
	}
	q.Done(held)
	q.Add(request("late"))
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("Get handed out a key after the shutdown")
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("Len after the shutdown: %d", n)
	}
}
