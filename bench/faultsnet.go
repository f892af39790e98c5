package main

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// cuttableFront is a front (front.go) that a partition cuts: while cut, the connections
// it carried are closed and new ones are accepted but never answered, as a network that
// drops every packet would leave them (the client's timeouts end them, or the heal).
type cuttableFront struct {
	listener net.Listener
	target   string
	mu       sync.Mutex
	cuts     int
	// open are the connections forwarded, both sides; held those accepted while cut.
	open map[net.Conn]struct{}
	held map[net.Conn]struct{}
}

// openCuttableFront starts a front on the i-th front address that forwards to target.
func openCuttableFront(ctx context.Context, i int, target string) (*cuttableFront, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", frontAddress(i)+":0")
	if err != nil {
		return nil, fmt.Errorf("front %d: %w", i, err)
	}
	f := &cuttableFront{listener: l, target: target, open: map[net.Conn]struct{}{}, held: map[net.Conn]struct{}{}}
	go f.serve(ctx)
	return f, nil
}

func (f *cuttableFront) addr() string { return f.listener.Addr().String() }

func (f *cuttableFront) serve(ctx context.Context) {
	var d net.Dialer
	for {
		conn, err := f.listener.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.cuts > 0 {
			f.held[conn] = struct{}{}
			f.mu.Unlock()
			continue
		}
		f.mu.Unlock()
		upstream, err := d.DialContext(ctx, "tcp", f.target)
		if err != nil {
			_ = conn.Close()
			continue
		}
		f.mu.Lock()
		// Cut while dialing: held, as if accepted a moment later.
		if f.cuts > 0 {
			_ = upstream.Close()
			f.held[conn] = struct{}{}
			f.mu.Unlock()
			continue
		}
		f.open[conn], f.open[upstream] = struct{}{}, struct{}{}
		f.mu.Unlock()
		go func() {
			pipe(conn, upstream)
			f.mu.Lock()
			delete(f.open, conn)
			delete(f.open, upstream)
			f.mu.Unlock()
		}()
	}
}

// cut partitions the front until as many heal calls.
func (f *cuttableFront) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cuts++
	if f.cuts == 1 {
		closeAll(f.open)
	}
}

// heal undoes one cut; the last one closes the connections held meanwhile.
func (f *cuttableFront) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cuts--
	if f.cuts == 0 {
		closeAll(f.held)
		clear(f.held)
	}
}

func (f *cuttableFront) close() {
	_ = f.listener.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	closeAll(f.open)
	closeAll(f.held)
}

func closeAll(conns map[net.Conn]struct{}) {
	for c := range conns {
		_ = c.Close()
	}
}
