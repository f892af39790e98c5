// Package fairshare bounds how many of a pool's workers one key (a destination cluster,
// a source's host) holds at once, so a key whose work is slow (a webhook that sleeps, a
// server that trickles) leaves the others their share. A worker turned away holds
// nothing: its item is looked at again after a short, jittered wait.
package fairshare

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Slots counts the workers each key holds. The zero value is ready to use, and it is
// safe for concurrent use.
type Slots[K comparable] struct {
	mu   sync.Mutex
	held map[K]int
}

// Take takes a slot for key if it holds fewer than limit (limit <= 0: no bound); release
// gives it back, once.
func (s *Slots[K]) Take(key K, limit int) (release func(), ok bool) {
	if limit <= 0 {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] >= limit {
		return nil, false
	}
	if s.held == nil {
		s.held = map[K]int{}
	}
	s.held[key]++
	var once sync.Once
	return func() { once.Do(func() { s.give(key) }) }, true
}

func (s *Slots[K]) give(key K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key]--; s.held[key] <= 0 {
		delete(s.held, key)
	}
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
