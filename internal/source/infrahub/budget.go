package infrahub

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Budget is the memory that Infrahub's answers may take at once, shared by every sync of
// an operator: however many syncs run and whatever their Infrahubs send, the answers they
// hold while they read, decode and store them never add up to more. An answer is weighed
// before its body is read, so memory is held first and used after. It is safe for
// concurrent use.
type Budget struct {
	total int64
	sem   *semaphore.Weighted

	// inUse mirrors what is held, for tests to observe: the semaphore alone decides.
	mu    sync.Mutex
	inUse int64
}

// NewBudget returns a budget of total bytes.
func NewBudget(total int64) *Budget {
	return &Budget{total: total, sem: semaphore.NewWeighted(total)}
}

// Total is the budget's size in bytes.
func (b *Budget) Total() int64 { return b.total }

// reservation is memory held of a budget (none when its budget is nil).
type reservation struct {
	b *Budget
	n int64
}

// reserve holds n bytes of the budget, waiting until others release enough or ctx ends.
// More than the whole budget is refused at once rather than waited for, as no release
// could ever make room for it. A nil budget holds nothing and never refuses.
func (b *Budget) reserve(ctx context.Context, n int64, what string) (*reservation, error) {
	if b == nil {
		return &reservation{}, nil
	}
	if n > b.total {
		return nil, &LimitError{Limit: LimitMemory, Max: b.total, Got: n, What: what}
	}
	// Waiting is fair (first come, first served), so a large answer is not starved by
	// small ones; a sync holds one reservation at a time, so waiting for one never
	// deadlocks (growing one, for an answer of undeclared size, may: see readGrowing).
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("wait for %s of the memory budget for %s: %w", formatBytes(n), what, err)
	}
	b.add(n)
	return &reservation{b: b, n: n}, nil
}

func (b *Budget) add(n int64) {
	b.mu.Lock()
	b.inUse += n
	b.mu.Unlock()
}

// held is how much of the budget is held now.
func (b *Budget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}

// grow holds n bytes more, waiting as reserve does.
func (r *reservation) grow(ctx context.Context, n int64, what string) error {
	if r == nil || r.b == nil {
		return nil
	}
	if r.n+n > r.b.total {
		return &LimitError{Limit: LimitMemory, Max: r.b.total, Got: r.n + n, What: what}
	}
	if err := r.b.sem.Acquire(ctx, n); err != nil {
		return fmt.Errorf("wait for %s more of the memory budget for %s: %w", formatBytes(n), what, err)
	}
	r.b.add(n)
	r.n += n
	return nil
}

// shrink gives back what is held over n: an answer turned out smaller than reserved.
func (r *reservation) shrink(n int64) {
	if r == nil || r.b == nil || n >= r.n {
		return
	}
	r.b.sem.Release(r.n - n)
	r.b.add(n - r.n)
	r.n = n
}

// release gives back everything held; releasing twice is harmless.
func (r *reservation) release() {
	r.shrink(0)
}
