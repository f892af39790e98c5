package ocisource

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/vidra-operator/vidra/internal/source/httpbound"
)

// target is a Remote made ready for the registry client: its repository, and the
// transport and credentials every request uses.
type target struct {
	repo      name.Repository
	url       string // oci://host/repository, safe to show (it never holds credentials)
	nameOpts  []name.Option
	auth      authn.Authenticator
	transport *http.Transport
	insecure  bool
}

func newTarget(r Remote) (*target, error) {
	repository, err := parseURL(r.URL)
	if err != nil {
		return nil, err
	}
	nameOpts := []name.Option{name.StrictValidation}
	if r.InsecureHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	repo, err := name.NewRepository(repository, nameOpts...)
	if err != nil {
		return nil, &InvalidError{Msg: fmt.Sprintf("URL oci://%s does not name a repository (no tag or digest belongs in it): %v", repository, err)}
	}
	t, err := newTransport(r.CA)
	if err != nil {
		return nil, err
	}
	auth := authn.Anonymous
	if r.Username != "" || r.Password != "" {
		auth = &authn.Basic{Username: r.Username, Password: r.Password}
	}
	return &target{
		repo: repo, url: "oci://" + repo.Name(), nameOpts: nameOpts,
		auth: auth, transport: t, insecure: r.InsecureHTTP,
	}, nil
}

// parseURL returns host/repository of an oci:// URL. Errors never repeat a URL that
// might carry credentials.
func parseURL(raw string) (string, error) {
	if !strings.HasPrefix(raw, "oci://") {
		return "", &InvalidError{Msg: "URL must start with oci://"}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", &InvalidError{Msg: "URL is not a valid oci://host/repository address"}
	}
	if u.User != nil {
		return "", &InvalidError{Msg: "URL must not hold credentials: set Username and Password instead"}
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", &InvalidError{Msg: "URL must not hold a query or fragment"}
	}
	repository := strings.Trim(u.Path, "/")
	if u.Host == "" || repository == "" {
		return "", &InvalidError{Msg: fmt.Sprintf("URL %s is not of the form oci://host[:port]/repository", u.Redacted())}
	}
	return u.Host + "/" + repository, nil
}

// newTransport trusts ca in addition to the system's roots.
func newTransport(ca []byte) (*http.Transport, error) {
	base, ok := remote.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("registry client's default transport is a %T, not an *http.Transport", remote.DefaultTransport)
	}
	t, err := httpbound.Trusting(base, ca)
	if errors.Is(err, httpbound.ErrNoCertificate) {
		return nil, &InvalidError{Msg: "CA holds no PEM certificate"}
	}
	return t, err
}

// options are the registry client's options for one call.
func (t *target) options(ctx context.Context) []remote.Option {
	return t.optionsVia(ctx, t.roundTripper())
}

// optionsVia are the options for one call sent through rt, which wraps roundTripper.
func (t *target) optionsVia(ctx context.Context, rt http.RoundTripper) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(t.auth),
		remote.WithTransport(rt),
		remote.WithUserAgent("vidra-ocisource"),
	}
}

// roundTripper is the target's transport, refusing plain http unless it is allowed.
func (t *target) roundTripper() http.RoundTripper {
	if !t.insecure {
		return httpsOnly{inner: t.transport}
	}
	return t.transport
}

// close drops the connections this target opened; each call makes its own transport.
func (t *target) close() {
	t.transport.CloseIdleConnections()
}

// httpsOnly refuses plain http. The registry client quietly falls back to http for
// localhost and private addresses; without InsecureHTTP that would send credentials and
// manifests in the clear, so it must fail instead.
type httpsOnly struct {
	inner http.RoundTripper
}

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &refusedHTTPError{host: req.URL.Host}
	}
	resp, err := h.inner.RoundTrip(req)
	// An http server answers a TLS hello with an HTTP response (as net/http's client
	// checks before it reports http.ErrSchemeMismatch).
	var record tls.RecordHeaderError
	if errors.As(err, &record) && string(record.RecordHeader[:]) == "HTTP/" {
		return nil, &plainHTTPError{host: req.URL.Host}
	}
	return resp, err
}

// plainHTTPError is a registry that answered https with plain http.
type plainHTTPError struct {
	host string
}

func (e *plainHTTPError) Error() string {
	return e.host + " answers on plain http"
}

// refusedHTTPError is an http request httpsOnly refused (the client's fallback after
// https failed for some other reason, which is the error that matters).
type refusedHTTPError struct {
	host string
}

func (e *refusedHTTPError) Error() string {
	return "plain http to " + e.host + " refused (InsecureHTTP is not set)"
}
