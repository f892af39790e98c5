package helmsource

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/vidra-operator/vidra/internal/source/httpbound"
)

// httpClient is a client for src's repository: it trusts src.CA, refuses plain http
// unless src allows it, and sends src's credentials to the repository's origin only,
// whatever redirects or archive URLs point elsewhere.
func (c *Client) httpClient(src Source, repo repository) (*http.Client, error) {
	t, err := c.transport(src.CA)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Transport: &sourceTransport{inner: t, origin: repo.origin, src: src},
		Timeout:   c.timeout,
	}, nil
}

// transport is a transport trusting ca in addition to the system's roots, shared by the
// sources that trust the same CA so that connections are reused.
func (c *Client) transport(ca []byte) (*http.Transport, error) {
	key := fmt.Sprintf("%x", sha256.Sum256(ca))
	if t, ok := c.transports.Get(key); ok {
		return t.(*http.Transport), nil
	}
	base, err := httpbound.Default()
	if err != nil {
		return nil, err
	}
	t, err := httpbound.Trusting(base, ca)
	if errors.Is(err, httpbound.ErrNoCertificate) {
		return nil, &InvalidError{Msg: "the CA holds no PEM certificate"}
	}
	if err != nil {
		return nil, err
	}
	c.transports.Add(key, t)
	return t, nil
}

// sourceTransport adds credentials for the repository's own origin and refuses plain
// http unless the source allows it (a redirect may lead there too).
type sourceTransport struct {
	inner  http.RoundTripper
	origin string
	src    Source
}

func (s *sourceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
	}
	switch req.URL.Scheme {
	case "https":
	case "http":
		if !s.src.InsecureHTTP {
			closeBody()
			return nil, &InvalidError{Msg: fmt.Sprintf("%s is plain http; set spec.source.insecureAllowHTTP to allow it", display(req.URL))}
		}
	default:
		closeBody()
		return nil, &InvalidError{Msg: fmt.Sprintf("%s: scheme %q is not fetched", display(req.URL), req.URL.Scheme)}
	}
	if (s.src.Username != "" || s.src.Password != "") && origin(req.URL) == s.origin {
		req = req.Clone(req.Context())
		req.SetBasicAuth(s.src.Username, s.src.Password)
	}
	return s.inner.RoundTrip(req)
}

// get sends a GET to rawURL with headers; it returns the response or an error that
// names the URL without credentials or query.
func get(ctx context.Context, client *http.Client, rawURL string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, &InvalidError{Msg: fmt.Sprintf("%s is not a URL to fetch", displayURL(rawURL))}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "vidra-helmsource")
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			// url.Error repeats the URL with its query; ours says it without.
			err = uerr.Err
		}
		var invalid *InvalidError
		if errors.As(err, &invalid) {
			return nil, invalid
		}
		return nil, fmt.Errorf("GET %s: %w", displayURL(rawURL), err)
	}
	return resp, nil
}

// closeBody closes a response's body once read: one that is not read (any status but OK)
// is drained a little first, so that its connection can be reused.
func closeBody(resp *http.Response) {
	if resp.StatusCode != http.StatusOK {
		drain(resp.Body)
		return
	}
	_ = resp.Body.Close()
}

// drain reads what is left of a small body (so the connection can be reused) and
// closes it.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	_ = body.Close()
}
