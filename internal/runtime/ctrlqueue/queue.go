// Package ctrlqueue builds the controllers' work queues: controller-runtime's priority
// queue, shut down without leaving a worker waiting for ever.
//
// In controller-runtime v0.24.1 a worker parked in the priority queue's GetWithPriority
// leaves through the queue's closed done channel at ShutDown without being counted out,
// and the queue's dispatcher may then send a ready item to it for ever, holding the locks
// that Done and GetWithPriority take: the workers finishing a reconcile wait on them,
// and the controller's stop waits for its workers until the manager's grace period ends
// (kubernetes-sigs/controller-runtime#3538, fixed upstream after v0.24.1). A replica
// that had just taken a peer's clusters over, thousands of keys ready, took its whole
// grace period to stop. Here the queue is shut down only once no worker is inside it:
// each one parked is woken first with a key of its own, and no Done reaches the queue
// once it is shut down.
package ctrlqueue

import (
	"math"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// wakeWait bounds how long ShutDown waits for the parked workers it woke; past it the
// queue is shut down as controller-runtime's alone would be, with its race. The dispatcher
// hands each parked worker a key at once, so it is not reached. (The wake-up keys show
// in the queue's metrics, at the stop alone.)
const wakeWait = 10 * time.Second

// NewFunc is a controller's NewQueue option.
type NewFunc[T comparable] func(name string, limiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T]

// New returns the NewQueue option of a controller whose keys are Ts: controller-runtime's
// priority queue with limiter, which wake names the n-th wake-up key of, a key that no
// object has.
func New[T comparable](wake func(n int) T) NewFunc[T] {
	return func(name string, limiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		inner := priorityqueue.New(name, func(o *priorityqueue.Opts[T]) { o.RateLimiter = limiter })
		return &queue[T]{PriorityQueue: inner, wake: wake, drained: make(chan struct{})}
	}
}

type queue[T comparable] struct {
	priorityqueue.PriorityQueue[T]
	wake func(n int) T

	mu sync.Mutex
	// getting counts the callers inside the inner GetWithPriority; once stopping, none
	// enters, and drained is closed when the last one has left.
	getting  int
	stopping bool
	drained  chan struct{}
	stop     sync.Once

	// closing guards the inner queue's ShutDown against Done and Len, which may wait
	// for ever on a queue shut down: closed is set, and the inner queue shut down, once
	// none is running.
	closing sync.RWMutex
	closed  bool
}

func (q *queue[T]) Get() (T, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}

func (q *queue[T]) GetWithPriority() (T, int, bool) {
	var zero T
	q.mu.Lock()
	if q.stopping {
		q.mu.Unlock()
		return zero, 0, true
	}
	q.getting++
	q.mu.Unlock()

	item, priority, shutdown := q.PriorityQueue.GetWithPriority()

	q.mu.Lock()
	stopping := q.stopping
	q.mu.Unlock()
	if stopping && !shutdown {
		// Handed out while stopping, a wake-up or an object's key: not worked on, and
		// done before this caller counts out, so before the inner queue is shut down.
		q.Done(item)
	}
	q.mu.Lock()
	q.getting--
	if q.stopping && q.getting == 0 {
		close(q.drained)
	}
	q.mu.Unlock()
	if stopping {
		return zero, 0, true
	}
	return item, priority, shutdown
}

func (q *queue[T]) Done(item T) {
	q.closing.RLock()
	defer q.closing.RUnlock()
	if !q.closed {
		q.PriorityQueue.Done(item)
	}
}

func (q *queue[T]) Len() int {
	q.closing.RLock()
	defer q.closing.RUnlock()
	if q.closed {
		return 0
	}
	return q.PriorityQueue.Len()
}

func (q *queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stopping
}

// ShutDownWithDrain shuts down without draining, as controller-runtime's priority queue
// does: controller-runtime does not drain.
func (q *queue[T]) ShutDownWithDrain() { q.ShutDown() }

// ShutDown wakes every caller parked in the inner queue with a key of its own, at the
// highest priority, waits until none is left inside, and only then shuts the inner queue
// down.
func (q *queue[T]) ShutDown() {
	q.stop.Do(func() {
		q.mu.Lock()
		q.stopping = true
		parked := q.getting
		if parked == 0 {
			close(q.drained)
		}
		q.mu.Unlock()
		for n := range parked {
			q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(math.MaxInt)}, q.wake(n))
		}
		select {
		case <-q.drained:
		case <-time.After(wakeWait):
		}
		q.closing.Lock()
		defer q.closing.Unlock()
		q.closed = true
		q.PriorityQueue.ShutDown()
	})
}
