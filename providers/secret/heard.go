package secret

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// heardFrom records when a cluster's API server last answered through the cluster's
// connections: a response that is not a server error, or data on one (a watch's event or
// bookmark). A cluster heard from since its last probe, within a probe interval, is not
// probed then: its watches said as much as the probe would, so an idle fleet's probes
// cost no request where its watches' bookmarks arrive. A silent cluster is probed as
// always.
type heardFrom struct {
	start time.Time
	// last is when it was last heard from, as time since start (0: never).
	last atomic.Int64
}

func newHeardFrom() *heardFrom { return &heardFrom{start: time.Now()} }

func (h *heardFrom) record() { h.last.Store(int64(time.Since(h.start))) }

// since says whether the cluster was heard from after t and within the last d.
func (h *heardFrom) since(t time.Time, d time.Duration) bool {
	at := h.at()
	return !at.IsZero() && at.After(t) && time.Since(at) < d
}

// at is when the cluster was last heard from; zero if never.
func (h *heardFrom) at() time.Time {
	last := h.last.Load()
	if last == 0 {
		return time.Time{}
	}
	return h.start.Add(time.Duration(last))
}

// wrap is a rest.Config's WrapTransport: it records what the cluster's API server says.
func (h *heardFrom) wrap(next http.RoundTripper) http.RoundTripper {
	return heardTransport{next: next, heard: h}
}

type heardTransport struct {
	next  http.RoundTripper
	heard *heardFrom
}

func (t heardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode >= http.StatusInternalServerError {
		return resp, err
	}
	t.heard.record()
	resp.Body = heardBody{ReadCloser: resp.Body, heard: t.heard}
	return resp, nil
}

type heardBody struct {
	io.ReadCloser
	heard *heardFrom
}

func (b heardBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.heard.record()
	}
	return n, err
}
