package gitsource

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/vidra-operator/vidra/internal/source/httpbound"
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
	// refs bounds the ref advertisements the remote sends (GET .../info/refs),
	// pack the rest (a clone's POST .../git-upload-pack); nil is no bound.
	refs, pack *httpbound.Budget
}

type exchangeKey struct{}

// newExchange is an exchange of at most refsMax bytes of ref advertisements and
// packMax of anything else (no bound when ≤ 0), trusting ca beside the system's
// roots.
func newExchange(ca []byte, refsMax, packMax int64) (*exchange, error) {
	base, err := httpbound.Default()
	if err != nil {
		return nil, err
	}
	t, err := httpbound.Trusting(base, ca)
	if errors.Is(err, httpbound.ErrNoCertificate) {
		return nil, &InvalidError{Reason: "the Secret's caFile holds no PEM certificate"}
	}
	if err != nil {
		return nil, err
	}
	x := &exchange{transport: t}
	if refsMax > 0 {
		x.refs = httpbound.NewBudget(refsMax)
	}
	if packMax > 0 {
		x.pack = httpbound.NewBudget(packMax)
	}
	return x, nil
}

// over is the budget the remote went past, if any.
func (x *exchange) over() *httpbound.Budget {
	for _, b := range []*httpbound.Budget{x.refs, x.pack} {
		if b != nil && b.Over() {
			return b
		}
	}
	return nil
}

// budget is what bounds the response to req.
func (x *exchange) budget(req *http.Request) *httpbound.Budget {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/info/refs") {
		return x.refs
	}
	return x.pack
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
	if b := x.budget(req); b != nil {
		resp.Body = b.Body(resp.Body)
	}
	return resp, nil
}
