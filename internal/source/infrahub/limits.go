package infrahub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Limits bound what one sync reads from Infrahub, so that no Infrahub — hostile, broken
// or merely large — can exhaust the memory of the operator that every other sync shares.
// A zero field bounds nothing.
type Limits struct {
	// MaxArtifacts is the most artifacts one listing may hold; a larger listing is not
	// read to its end.
	MaxArtifacts int
	// MaxBytes is the most artifact content one sync downloads.
	MaxBytes int64
	// Timeout bounds one sync's listing and downloads together.
	Timeout time.Duration
	// Budget is the memory shared by every sync's answers.
	Budget *Budget
}

// Limit names a bound of Limits.
type Limit string

// The bounds a sync may go over.
const (
	LimitArtifacts Limit = "artifacts"
	LimitBytes     Limit = "bytes"
	LimitMemory    Limit = "memory"
	LimitTime      Limit = "time"
)

// LimitError is a sync that went over one of its Limits. It is no fault of a request:
// retrying does not help until the bound or what Infrahub serves changes.
type LimitError struct {
	Limit Limit
	// Max is the bound: artifacts, bytes or nanoseconds.
	Max int64
	// Got is what went over it, as far as it was read (0: not known).
	Got int64
	// What names what went over it: "the listing", "artifact <id>".
	What string
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case LimitArtifacts:
		return fmt.Sprintf("%s holds %d artifacts, over the %d one sync may list", e.What, e.Got, e.Max)
	case LimitBytes:
		if e.Got > 0 {
			return fmt.Sprintf("%s takes this sync's downloads to %s, past the %s one sync may download", e.What, formatBytes(e.Got), formatBytes(e.Max))
		}
		return fmt.Sprintf("%s takes this sync's downloads past the %s one sync may download", e.What, formatBytes(e.Max))
	case LimitMemory:
		return fmt.Sprintf("%s needs at least %s of memory to be read and decoded, more than the whole %s budget that syncs share", e.What, formatBytes(e.Got), formatBytes(e.Max))
	case LimitTime:
		return fmt.Sprintf("%s was not done within %v, the most one sync may spend reading Infrahub", e.What, time.Duration(e.Max))
	}
	return fmt.Sprintf("%s is over the %s bound", e.What, e.Limit)
}

// AsLimitError returns the LimitError err wraps, if any.
func AsLimitError(err error) (*LimitError, bool) {
	var lim *LimitError
	ok := errors.As(err, &lim)
	return lim, ok
}

// The memory an answer takes while it is used, per byte read. Decoding a manifest into
// objects takes about seven times its size (measured on a 5 MiB bundle of CRDs and
// ConfigMaps), and the bytes themselves one more. A listing decodes into a few strings
// per artifact.
const (
	contentWeight = 8
	listingWeight = 3
)

// Quota is one sync's share of its Limits: the artifacts and bytes it read so far, its
// deadline, and the memory held for the last content it downloaded, which stays held
// while the caller decodes and stores it, until the next download or Close. A sync that
// went over its artifacts, bytes or time downloads nothing more. A nil Quota bounds
// nothing. Its methods are safe for concurrent use, but a sync downloads one artifact at
// a time: holding one reservation while waiting for the next could deadlock two syncs.
type Quota struct {
	limits   Limits
	deadline time.Time

	mu         sync.Mutex
	downloaded int64
	held       *reservation
	// over is the first bound the sync went over: sticky ones stop every later download.
	over   *LimitError
	sticky bool
}

// NewQuota starts one sync's share of limits at now.
func NewQuota(limits Limits, now time.Time) *Quota {
	q := &Quota{limits: limits}
	if limits.Timeout > 0 {
		q.deadline = now.Add(limits.Timeout)
	}
	return q
}

// Exceeded is the first bound the sync went over (nil: none).
func (q *Quota) Exceeded() *LimitError {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.over
}

// Downloaded is how many bytes of content the sync downloaded.
func (q *Quota) Downloaded() int64 {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.downloaded
}

// Close releases the memory held for the last download.
func (q *Quota) Close() {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.held.release()
	q.held = nil
}

// exceed records that the sync went over a bound and returns err.
func (q *Quota) exceed(err *LimitError, sticky bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.over == nil {
		q.over = err
	}
	q.sticky = q.sticky || sticky
	return err
}

// bound is ctx ending at the sync's deadline too.
func (q *Quota) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if q == nil || q.deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, q.deadline)
}

// timedOut turns err into the sync's LimitError when it is the sync's deadline that
// ended the request (parent is the caller's context, which did not end).
func (q *Quota) timedOut(parent context.Context, err error, what string) error {
	if err == nil || q == nil || q.deadline.IsZero() || parent.Err() != nil || time.Now().Before(q.deadline) {
		return err
	}
	if _, ok := AsLimitError(err); ok {
		return err
	}
	return q.exceed(&LimitError{Limit: LimitTime, Max: int64(q.limits.Timeout), What: what}, true)
}

// checkListed refuses a listing of n artifacts over the bound.
func (q *Quota) checkListed(n int) error {
	if q == nil || q.limits.MaxArtifacts <= 0 || n <= q.limits.MaxArtifacts {
		return nil
	}
	return q.exceed(&LimitError{Limit: LimitArtifacts, Max: int64(q.limits.MaxArtifacts), Got: int64(n), What: "the listing"}, true)
}

// startDownload releases the memory held for the previous download (its caller is done
// with it) and says whether the sync may download more.
func (q *Quota) startDownload() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.held.release()
	q.held = nil
	if q.sticky {
		return fmt.Errorf("nothing more is downloaded: %w", q.over)
	}
	return nil
}

// downloadRead is how the content of artifact id is read within the quota: at most what
// is left of the sync's bytes and of the artifact size the client takes, and no more
// than the memory budget can hold.
func (q *Quota) downloadRead(id string) *boundedRead {
	q.mu.Lock()
	defer q.mu.Unlock()
	what := "artifact " + id
	b := &boundedRead{q: q, budget: q.limits.Budget, limit: MaxArtifactBytes, weight: contentWeight, what: what,
		over: func(int64) error { return fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, int64(MaxArtifactBytes)) }}
	if maxBytes := q.limits.MaxBytes; maxBytes > 0 && maxBytes-q.downloaded < b.limit {
		done := q.downloaded
		b.limit = maxBytes - done
		b.over = func(got int64) error {
			err := &LimitError{Limit: LimitBytes, Max: maxBytes, What: what}
			if got >= 0 {
				err.Got = done + got
			}
			return q.exceed(err, true)
		}
	}
	return b
}

// listingRead is how a listing answer is read within the quota: at most limit bytes, and
// no more than the memory budget can hold while it is decoded. The caller releases it.
func (q *Quota) listingRead(limit int64) *boundedRead {
	b := &boundedRead{q: q, limit: limit, weight: listingWeight, what: "the listing",
		over: func(int64) error { return fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, limit) }}
	if q != nil {
		b.budget = q.limits.Budget
	}
	return b
}

// count counts content the sync read and keeps the memory held for it.
func (q *Quota) count(b *boundedRead, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.downloaded += int64(n)
	q.held = b.held
}

// boundedRead reads an answer's body within a limit, holding memory of a budget for it
// before reading: its declared size when the answer gives one, else the most it may be.
type boundedRead struct {
	q      *Quota // nil: none
	budget *Budget
	// limit is the most bytes read; over is the error of an answer of got bytes beyond
	// it (-1: of a size not declared, read past the limit).
	limit int64
	over  func(got int64) error
	// weight is the memory held per byte.
	weight int64
	what   string
	// held is the memory held for what was read; the caller releases it.
	held *reservation
}

func (b *boundedRead) read(ctx context.Context, body io.Reader, declared int64) ([]byte, error) {
	if declared > b.limit {
		return nil, b.over(declared)
	}
	if declared < 0 {
		return b.readGrowing(ctx, body)
	}
	size := declared
	if b.budget != nil && size*b.weight > b.budget.Total() {
		return nil, b.overMemory(size)
	}
	r, err := b.budget.reserve(ctx, size*b.weight, b.what)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(body, size+1))
	if err != nil {
		r.release()
		return nil, err
	}
	switch n := int64(len(data)); {
	case n > b.limit:
		r.release()
		return nil, b.over(-1)
	case n > size:
		r.release()
		return nil, b.overMemory(n)
	}
	r.shrink(int64(len(data)) * b.weight)
	b.held = r
	return data, nil
}

// growStart is the memory first held for an answer of undeclared size, in bytes of it.
const growStart = 64 << 10

// readGrowing reads an answer of undeclared size, holding memory as it arrives: growStart
// bytes' worth, doubled each time it fills, up to what the budget can hold. An answer that
// trickles holds only about what it brought, never the whole budget while it waits for
// bytes. Growing waits while holding; should every holder wait so, the stall guard gives
// up the answers that bring nothing meanwhile, which frees their memory.
func (b *boundedRead) readGrowing(ctx context.Context, body io.Reader) ([]byte, error) {
	most := b.limit
	if b.budget != nil {
		most = min(most, b.budget.Total()/b.weight)
	}
	held := min(int64(growStart), most)
	r, err := b.budget.reserve(ctx, held*b.weight, b.what)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		if _, err := buf.ReadFrom(io.LimitReader(body, held-int64(buf.Len())+1)); err != nil {
			r.release()
			return nil, err
		}
		n := int64(buf.Len())
		switch {
		case n <= held: // the whole answer
			r.shrink(n * b.weight)
			b.held = r
			return buf.Bytes(), nil
		case n > b.limit:
			r.release()
			return nil, b.over(-1)
		case held >= most:
			r.release()
			return nil, b.overMemory(n)
		}
		next := min(2*held, most)
		if err := r.grow(ctx, (next-held)*b.weight, b.what); err != nil {
			r.release()
			return nil, err
		}
		held = next
	}
}

// overMemory is the error of an answer of n bytes (at least) that the whole budget cannot
// hold. It stops only this answer: the sync's other answers may fit.
func (b *boundedRead) overMemory(n int64) error {
	err := &LimitError{Limit: LimitMemory, Max: b.budget.Total(), Got: n * b.weight, What: b.what}
	if b.q == nil {
		return err
	}
	return b.q.exceed(err, false)
}

// release gives back the memory held for the answer.
func (b *boundedRead) release() {
	if b != nil {
		b.held.release()
	}
}

// formatBytes writes n in the unit a person reads best.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		if n%(1<<20) == 0 {
			return fmt.Sprintf("%d MiB", n>>20)
		}
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
