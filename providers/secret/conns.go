package secret

import (
	"context"
	"net"
	"sync"
)

// connTracker dials a cluster's connections and remembers them, so that every one of them
// can be closed when the cluster is disengaged. Closing idle connections is not enough: a
// watch cancelled a moment earlier may still hold its connection busy, and would keep it,
// with its read loop, for as long as the transport's idle timeout.
type connTracker struct {
	dialer net.Dialer
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newConnTracker(dialer net.Dialer) *connTracker {
	return &connTracker{dialer: dialer, conns: map[*trackedConn]struct{}{}}
}

// DialContext has the signature of rest.Config.Dial.
func (t *connTracker) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := t.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: conn, tracker: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = conn.Close()
		return nil, net.ErrClosed
	}
	t.conns[tc] = struct{}{}
	return tc, nil
}

// closeAll closes every connection and refuses new ones.
func (t *connTracker) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = map[*trackedConn]struct{}{}
	t.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	tracker *connTracker
	once    sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.tracker.mu.Lock()
		delete(c.tracker.conns, c)
		c.tracker.mu.Unlock()
	})
	return c.Conn.Close()
}
