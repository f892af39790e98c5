// Package fairshare bounds how many of a pool's workers one key (a destination cluster,
// a source's host) holds at once, so a key whose work is slow (a webhook that sleeps, a
// server that trickles) leaves the others their share. A worker turned away holds
// nothing: its item is looked at again after a short, jittered wait, or, when it waits
// with TakeOrWait, as soon as its key gives a slot back.
package fairshare

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Slots counts the workers each key holds. The zero value is ready to use, and it is
// safe for concurrent use.
type Slots[K comparable] struct {
	mu      sync.Mutex
	held    map[K]int
	waiting map[K]*waiters
}

// waiters are the items turned away from one key, in the order they came, each once.
type waiters struct {
	order []string
	wakes map[string]func()
}

// Take takes a slot for key if it holds fewer than limit (limit <= 0: no bound); release
// gives it back, once.
func (s *Slots[K]) Take(key K, limit int) (release func(), ok bool) {
	return s.TakeOrWait(key, limit, "", nil)
}

// TakeOrWait is Take; when key holds its limit and wake is set, it also queues wake
// under waiter (once, however often it is turned away) to be called when key next gives
// a slot back, so a turned-away item is looked at again as soon as it may go, not after
// a fixed wait.
func (s *Slots[K]) TakeOrWait(key K, limit int, waiter string, wake func()) (release func(), ok bool) {
	if limit <= 0 {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] < limit {
		if s.held == nil {
			s.held = map[K]int{}
		}
		s.held[key]++
		s.unqueue(key, waiter) // it goes now: no need to wake it later
		var once sync.Once
		return func() { once.Do(func() { s.give(key) }) }, true
	}
	if wake == nil {
		return nil, false
	}
	if s.waiting == nil {
		s.waiting = map[K]*waiters{}
	}
	w := s.waiting[key]
	if w == nil {
		w = &waiters{wakes: map[string]func(){}}
		s.waiting[key] = w
	}
	if _, queued := w.wakes[waiter]; !queued {
		w.order = append(w.order, waiter)
	}
	w.wakes[waiter] = wake
	return nil, false
}

func (s *Slots[K]) unqueue(key K, waiter string) {
	w := s.waiting[key]
	if w == nil {
		return
	}
	if _, queued := w.wakes[waiter]; !queued {
		return
	}
	delete(w.wakes, waiter)
	w.order = slices.DeleteFunc(w.order, func(q string) bool { return q == waiter })
	if len(w.order) == 0 {
		delete(s.waiting, key)
	}
}

// give gives back a slot of key and wakes the first item waiting for one, outside the
// lock: waking may enqueue work, which must not wait on the slots.
func (s *Slots[K]) give(key K) {
	if wake := s.release(key); wake != nil {
		wake()
	}
}

func (s *Slots[K]) release(key K) (wake func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key]--; s.held[key] <= 0 {
		delete(s.held, key)
	}
	w := s.waiting[key]
	if w == nil {
		return nil
	}
	first := w.order[0]
	wake = w.wakes[first]
	s.unqueue(key, first)
	return wake
}

// Held is how many slots key holds.
func (s *Slots[K]) Held(key K) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[key]
}

// Retry is how soon an item turned away looks again: about every base, jittered between
// half and one and a half of it, so those waiting do not all come back at once.
func Retry(base time.Duration) time.Duration {
	return base/2 + rand.N(base) //nolint:gosec // jitter, not a secret
}
