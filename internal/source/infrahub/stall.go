package infrahub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStalled is an answer whose body came slower than the client's floor: a trickling
// Infrahub would otherwise hold a sync's worker, and the memory weighed for the answer,
// for the whole request timeout at each of its artifacts.
var ErrStalled = errors.New("the answer stalled")

// A body must bring at least MinBytesPerWindow in every StallWindow, unless Options say
// otherwise: 1 KiB/s, far below any Infrahub on a working network.
const (
	StallWindow       = 10 * time.Second
	MinBytesPerWindow = 10 << 10
)

// progressReader counts what its body brings; a watchdog cancels the request when a
// window brings less than the floor.
type progressReader struct {
	body  io.Reader
	n     atomic.Int64
	done  chan struct{}
	start sync.Once
	watch func()
}

// Read starts the watchdog at its first call: a request waiting for its share of the
// memory budget before it reads has not stalled.
func (p *progressReader) Read(b []byte) (int, error) {
	p.start.Do(func() { go p.watch() })
	n, err := p.body.Read(b)
	p.n.Add(int64(n))
	return n, err
}

// watchProgress wraps body; cancel is called with an ErrStalled cause when a window of
// the client's stall window brings fewer bytes than its floor. Stop it once read.
func (c *Client) watchProgress(cancel context.CancelCauseFunc, body io.Reader) (r *progressReader, stop func()) {
	window, floor := c.opts.StallWindow, c.opts.MinBytesPerWindow
	if window <= 0 {
		window = StallWindow
	}
	if floor <= 0 {
		floor = MinBytesPerWindow
	}
	p := &progressReader{body: body, done: make(chan struct{})}
	p.watch = func() {
		tick := time.NewTicker(window)
		defer tick.Stop()
		var last int64
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
				n := p.n.Load()
				if n-last < floor {
					cancel(fmt.Errorf("%w: %d bytes in %s, fewer than the %d bytes every %s an answer must bring", ErrStalled, n-last, window, floor, window))
					return
				}
				last = n
			}
		}
	}
	return p, func() { close(p.done) }
}

// stalled is the read error err, or the stall that caused it.
func stalled(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) {
		return cause
	}
	return err
}
