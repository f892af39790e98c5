// Package httpbound reads what a source's server sends within a budget, whatever it
// declares, and builds transports that trust a source's own CA: the parts every source
// package (Git, OCI, Helm) shares of talking to a server it does not trust.
package httpbound

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// Budget is what the responses of one exchange with a server may hold in all.
type Budget struct {
	max  int64
	left atomic.Int64
	over atomic.Bool
}

// NewBudget is a budget of max bytes.
func NewBudget(max int64) *Budget {
	b := &Budget{max: max}
	b.left.Store(max)
	return b
}

// Max is the budget's bound.
func (b *Budget) Max() int64 { return b.max }

// Spent is what the bodies read so far took of it.
func (b *Budget) Spent() int64 { return b.max - b.left.Load() }

// Over says whether the server sent more than the budget. Callers test it rather than
// the read's error, which the libraries reading the body do not always wrap.
func (b *Budget) Over() bool { return b.over.Load() }

// ErrOver is what a body past its budget reads as.
var ErrOver = errors.New("the server sent more than its bound")

// Body reads body within the budget.
func (b *Budget) Body(body io.ReadCloser) io.ReadCloser {
	return &bounded{ReadCloser: body, budget: b}
}

type bounded struct {
	io.ReadCloser
	budget *Budget
}

func (r *bounded) Read(p []byte) (int, error) {
	left := r.budget.left.Load()
	if left <= 0 {
		// At the bound exactly, a body that ends there is within it; one that fails
		// there fails as it would have.
		var probe [1]byte
		n, err := r.ReadCloser.Read(probe[:])
		if n == 0 {
			if err == nil {
				err = io.ErrNoProgress
			}
			return 0, err
		}
		r.budget.over.Store(true)
		return 0, ErrOver
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.ReadCloser.Read(p)
	r.budget.left.Add(-int64(n))
	return n, err
}

// Transport sends requests through Inner and reads every response body within Budget.
type Transport struct {
	Inner  http.RoundTripper
	Budget *Budget
}

// RoundTrip sends req through Inner and bounds the response's body.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Inner.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = t.Budget.Body(resp.Body)
	return resp, nil
}

// ErrNoCertificate is a CA that holds no PEM certificate.
var ErrNoCertificate = errors.New("the CA holds no PEM certificate")

// Trusting is a clone of base that trusts ca beside the system's roots (base as it is
// when ca is empty).
func Trusting(base *http.Transport, ca []byte) (*http.Transport, error) {
	t := base.Clone()
	if len(ca) == 0 {
		return t, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		// Without system roots (a scratch image) the given CA alone is still useful.
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(ca) {
		return nil, ErrNoCertificate
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// Default is net/http's default transport, as an *http.Transport to clone.
func Default() (*http.Transport, error) {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("the default HTTP transport is not an *http.Transport")
	}
	return t, nil
}
