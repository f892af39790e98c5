// Package ociregistry is an OCI registry for tests: go-containerregistry's in-memory
// registry served on loopback, with optional basic auth, request counts, and helpers that
// push artifacts shaped as `flux push artifact` writes them.
package ociregistry

import (
	"bytes"
	"crypto/subtle"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is one in-memory registry, closed when the test ends.
type Registry struct {
	server *httptest.Server

	mu           sync.Mutex
	user, pass   string
	blobsOnly    bool // the credentials guard blobs only: anyone reads manifests
	manifestGets map[string]int
	blobGets     map[string]int
	tampered     map[string]bool // repos whose blobs are served altered
	cut          map[string]int  // repos whose blob downloads are cut after so many bytes
}

// New serves a registry over plain http on 127.0.0.1.
func New(t T) *Registry {
	t.Helper()
	r := newRegistry()
	r.server = r.unstarted()
	r.server.Start()
	t.Cleanup(r.server.Close)
	return r
}

// NewTLS serves a registry over https on 127.0.0.1 with a certificate of its own; CA
// returns the certificate a client must trust.
func NewTLS(t T) *Registry {
	t.Helper()
	r := newRegistry()
	r.server = r.unstarted()
	r.server.StartTLS()
	t.Cleanup(r.server.Close)
	return r
}

func newRegistry() *Registry {
	return &Registry{manifestGets: map[string]int{}, blobGets: map[string]int{}, tampered: map[string]bool{}, cut: map[string]int{}}
}

func (r *Registry) unstarted() *httptest.Server {
	s := httptest.NewUnstartedServer(r.handler())
	// Handshakes that tests make fail on purpose would otherwise be logged.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	return s
}

func (r *Registry) handler() http.Handler {
	// The registry's own request log would only add noise to test output.
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.authorized(req) {
			w.Header().Set("WWW-Authenticate", `Basic realm="ociregistry"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		tamper, cut := r.count(req)
		if tamper {
			w = &tamperingWriter{ResponseWriter: w}
		}
		if cut > 0 {
			w = &cuttingWriter{ResponseWriter: w, left: cut}
		}
		inner.ServeHTTP(w, req)
	})
}

// Host is the registry's host:port, as used in image references.
func (r *Registry) Host() string {
	return strings.TrimPrefix(strings.TrimPrefix(r.server.URL, "http://"), "https://")
}

// URL is repo's address in the oci:// form OCISync takes.
func (r *Registry) URL(repo string) string {
	return "oci://" + r.Host() + "/" + repo
}

// CA is the PEM certificate of a registry made by NewTLS (nil for New).
func (r *Registry) CA() []byte {
	if r.server.Certificate() == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.server.Certificate().Raw})
}

// RequireBasicAuth makes every later request without these credentials fail with 401 and
// a Basic challenge, so clients retry with theirs. Push uses them too.
func (r *Registry) RequireBasicAuth(user, pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.pass = user, pass
}

// RequireBasicAuthForBlobs is RequireBasicAuth for blobs alone: anyone may read tags
// and manifests, as a registry that authorizes each request may allow.
func (r *Registry) RequireBasicAuthForBlobs(user, pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.pass, r.blobsOnly = user, pass, true
}

// ManifestGets is the number of GET requests for manifests of repo seen so far (a pull
// fetches one; a HEAD does not count).
func (r *Registry) ManifestGets(repo string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manifestGets[repo]
}

// BlobGets is the number of GET requests for blobs (layers, configs) of repo seen so far.
func (r *Registry) BlobGets(repo string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets[repo]
}

func (r *Registry) credentials() (user, pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.user, r.pass
}

func (r *Registry) authorized(req *http.Request) bool {
	wantUser, wantPass := r.credentials()
	r.mu.Lock()
	blobsOnly := r.blobsOnly
	r.mu.Unlock()
	if (wantUser == "" && wantPass == "") || (blobsOnly && !strings.Contains(req.URL.Path, "/blobs/")) {
		return true
	}
	user, pass, ok := req.BasicAuth()
	return ok &&
		subtle.ConstantTimeCompare([]byte(user), []byte(wantUser)) == 1 &&
		subtle.ConstantTimeCompare([]byte(pass), []byte(wantPass)) == 1
}

// TamperBlobs makes later blob GETs of repo answer with byte 4 changed: for a gzip layer
// that is the header's timestamp, so the layer still decompresses to the same files but
// no longer matches its digest.
func (r *Registry) TamperBlobs(repo string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tampered[repo] = true
}

// count records GETs of /v2/<repo>/manifests/<ref> and /v2/<repo>/blobs/<digest> (repo
// may itself hold slashes, so the kind is found from the right), and says whether the
// answer is to be tampered with.
func (r *Registry) count(req *http.Request) (tamper bool, cut int) {
	if req.Method != http.MethodGet {
		return false, 0
	}
	path := strings.TrimPrefix(req.URL.Path, "/v2/")
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := strings.LastIndex(path, "/manifests/"); i > 0 {
		r.manifestGets[path[:i]]++
	}
	if i := strings.LastIndex(path, "/blobs/"); i > 0 {
		r.blobGets[path[:i]]++
		return r.tampered[path[:i]], r.cut[path[:i]]
	}
	return false, 0
}

// CutBlobs makes later blob GETs of repo end after n bytes of their body, as a connection
// that drops would (0: whole again).
func (r *Registry) CutBlobs(repo string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut[repo] = n
}

// cuttingWriter writes the first left bytes of the body and drops the rest: the response
// then ends short of its Content-Length, and the server closes the connection.
type cuttingWriter struct {
	http.ResponseWriter
	left int
}

func (w *cuttingWriter) Write(p []byte) (int, error) {
	if w.left <= 0 {
		return len(p), nil
	}
	n := min(len(p), w.left)
	w.left -= n
	if _, err := w.ResponseWriter.Write(p[:n]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// tamperingWriter flips byte 4 of the body it writes.
type tamperingWriter struct {
	http.ResponseWriter
	written int
}

func (w *tamperingWriter) Write(p []byte) (int, error) {
	if at := 4 - w.written; at >= 0 && at < len(p) {
		p = bytes.Clone(p)
		p[at] ^= 0xff
	}
	w.written += len(p)
	return w.ResponseWriter.Write(p)
}

// T is what the registry needs of a test: testing.TB has it, and so has a program (the
// bench) that serves a registry outside of any test.
type T interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	TempDir() string
}
