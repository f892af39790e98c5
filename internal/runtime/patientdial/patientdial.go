// Package patientdial dials an API server that refuses connections again, for a while,
// before it fails. A hub API server that restarts (an upgrade, a crash) is waited for at
// the dial: a watch broken with it resumes as soon as the API server listens again.
// Failed at once, the watch's reflector backs off, doubling each time up to 30 s with as
// much jitter again, and the back-off resets only after two quiet minutes; after a few
// short outages a cache stayed up to a minute behind a hub that was back (the faults
// bench). controller-runtime lets no cache set its reflectors' back-off
// (kubernetes/kubernetes#137572).
package patientdial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Defaults: a refused connection is dialled again every Retry, for Patience.
const (
	DefaultPatience = 30 * time.Second
	DefaultRetry    = 250 * time.Millisecond
)

// Dialer dials with Dialer, and dials again while the address refuses the connection,
// for at most Patience after the first refusal, or until the dial's context ends (an
// HTTP transport's dial outlives the request that asked for it: Patience bounds it).
type Dialer struct {
	net.Dialer
	Patience time.Duration
	Retry    time.Duration
}

// New is a Dialer with client-go's own dial timeout and keep-alive and the defaults.
func New() *Dialer {
	return &Dialer{
		Dialer:   net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		Patience: DefaultPatience,
		Retry:    DefaultRetry,
	}
}

// HTTPClientFor is an HTTP client for cfg whose connections are dialled patiently: the
// one to give a cache, whose watches then wait for their API server. Other clients keep
// failing at once, so that a request with no deadline is not held.
func HTTPClientFor(cfg *rest.Config) (*http.Client, error) {
	patient := rest.CopyConfig(cfg)
	patient.Dial = New().DialContext
	c, err := rest.HTTPClientFor(patient)
	if err != nil {
		return nil, fmt.Errorf("build a patient HTTP client: %w", err)
	}
	return c, nil
}

// DialContext is a rest.Config's Dial.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := d.Dialer.DialContext(ctx, network, address)
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return conn, err
	}
	giveUp := time.NewTimer(d.Patience)
	defer giveUp.Stop()
	retry := time.NewTicker(d.Retry)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, err
		case <-giveUp.C:
			return nil, err
		case <-retry.C:
		}
		conn, err = d.Dialer.DialContext(ctx, network, address)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			return conn, err
		}
	}
}
