package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
)

// fronts are TCP forwarders, each on an address of its own in the loopback range, in
// front of a member's API server: to the operator, each is a cluster of its own (its own
// URL, connections, TLS sessions and rate limiter), while a few control planes serve
// them all. TLS passes through untouched, so certificates are checked end to end.
type fronts struct {
	listeners []net.Listener
}

// frontAddress is the i-th front's IP: 127.77.0.1, 127.77.0.2, ... 127.77.0.250,
// 127.77.1.1, ... (Linux routes the whole of 127.0.0.0/8 to the loopback interface).
func frontAddress(i int) string {
	return fmt.Sprintf("127.77.%d.%d", i/250, i%250+1)
}

// open starts a front on the i-th address that forwards every connection to target
// ("host:port") and returns the front's "host:port".
func (f *fronts) open(ctx context.Context, i int, target string) (string, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", frontAddress(i)+":0")
	if err != nil {
		return "", fmt.Errorf("front %d: %w", i, err)
	}
	f.listeners = append(f.listeners, l)
	go f.serve(ctx, l, target)
	return l.Addr().String(), nil
}

func (f *fronts) serve(ctx context.Context, l net.Listener, target string) {
	var d net.Dialer
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		upstream, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			_ = conn.Close()
			continue
		}
		go pipe(conn, upstream)
	}
}

// pipe copies both ways until either side closes, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go copyHalf(a, b)
	go copyHalf(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}

// close stops every front; connections in flight end as their sides close.
func (f *fronts) close() error {
	var errs []error
	for _, l := range f.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
