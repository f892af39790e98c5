package gitsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// defaultMaxRefsBytes bounds what a remote may answer to a ref listing: the
// advertisement of GitHub's largest repositories, pull request refs included,
// is a few MiB.
const defaultMaxRefsBytes = 32 << 20

// installOnce installs boundedTransport as go-git's client for http:// and
// https://. go-git takes its transports from a process-wide table, and Flux's
// clone reaches them only through it; the table is written once, before the
// first exchange, and each exchange's bound and trust travel in its context.
var installOnce sync.Once

func installBoundedTransport() {
	installOnce.Do(func() {
		c := githttp.NewClient(&http.Client{Transport: boundedTransport{}})
		client.InstallProtocol("https", c)
		client.InstallProtocol("http", c)
	})
}

// exchange is what one listing or clone may read from a remote over HTTP, and
// the transport that trusts the remote's CA.
type exchange struct {
	transport *http.Transport
	// left is how many more body bytes the remote may send.
	left atomic.Int64
	max  int64
	// over is set once the remote sent more than max.
	over atomic.Bool
}

type exchangeKey struct{}

// newExchange is an exchange of at most max body bytes (none when max ≤ 0),
// trusting ca beside the system's roots.
func newExchange(ca []byte, max int64) (*exchange, error) {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("the default HTTP transport is a %T, not an *http.Transport", http.DefaultTransport)
	}
	t := base.Clone()
	if len(ca) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			// Without system roots (a scratch image) the given CA alone is still useful.
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ca) {
			return nil, &InvalidError{Reason: "the Secret's caFile holds no PEM certificate"}
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	x := &exchange{transport: t, max: max}
	x.left.Store(max)
	return x, nil
}

// within returns ctx carrying x, for go-git's requests made with it.
func (x *exchange) within(ctx context.Context) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// close drops the exchange's connections.
func (x *exchange) close() { x.transport.CloseIdleConnections() }

// boundedTransport sends go-git's HTTP requests through their exchange's
// transport. A refusal's body is never read: the server chooses its size, and
// its status says what happened. Any other body is cut off at the exchange's
// bound, so a remote that never stops answering costs a bounded read.
type boundedTransport struct{}

func (boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	x, ok := req.Context().Value(exchangeKey{}).(*exchange)
	if !ok {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("git over HTTP outside a bounded exchange")
	}
	resp, err := x.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		_ = resp.Body.Close()
		resp.Body, resp.ContentLength = http.NoBody, 0
		return resp, nil
	}
	if x.max > 0 {
		resp.Body = &cappedBody{ReadCloser: resp.Body, x: x}
	}
	return resp, nil
}

// errOverBound is what a body past its exchange's bound reads as; the
// exchange's over flag is what callers test, since go-git does not always
// wrap the errors it is given.
var errOverBound = errors.New("the remote sent more than its bound")

// cappedBody reads a body within its exchange's bound.
type cappedBody struct {
	io.ReadCloser
	x *exchange
}

func (c *cappedBody) Read(p []byte) (int, error) {
	left := c.x.left.Load()
	if left <= 0 {
		// At the bound exactly, a body that ends there is within it.
		var probe [1]byte
		if n, err := c.ReadCloser.Read(probe[:]); n == 0 && errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		c.x.over.Store(true)
		return 0, errOverBound
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.ReadCloser.Read(p)
	c.x.left.Add(-int64(n))
	return n, err
}
