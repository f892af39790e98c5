package helmrepo

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// repoPath is where a Repo serves its repository, so that relative archive URLs are
// resolved against a path, as on most real servers.
const repoPath = "/helm"

// Repo is a Helm repository served over httptest on 127.0.0.1, closed when the test
// ends: index.yaml (with digests, ETag and Last-Modified) and archives under charts/.
type Repo struct {
	t      ociregistry.T
	server *httptest.Server

	mu          sync.Mutex
	user, pass  string
	tls         bool
	noETag      bool
	absolute    bool
	archiveBase string
	path        string // where the repository is served; repoPath unless WithPath
	tamper      bool
	archives    map[string][]byte // "charts/<name>-<version>.tgz" → bytes
	versions    map[string]map[string]indexVersion
	index       []byte
	etag        string
	modified    time.Time
	indexGets   int
	indexBodies int
	archiveGets int
	withAuth    int
}

type indexVersion struct {
	APIVersion string    `json:"apiVersion"`
	Name       string    `json:"name"`
	Version    string    `json:"version"`
	URLs       []string  `json:"urls"`
	Digest     string    `json:"digest"`
	Created    time.Time `json:"created"`
}

// Option configures a Repo.
type Option func(*Repo)

// WithBasicAuth makes every request without these credentials fail with 401.
func WithBasicAuth(user, pass string) Option {
	return func(r *Repo) { r.user, r.pass = user, pass }
}

// WithPath serves the repository at path (such as "/stable") instead of /helm.
func WithPath(path string) Option { return func(r *Repo) { r.path = path } }

// WithTLS serves https with a certificate of the server's own (see CA).
func WithTLS() Option { return func(r *Repo) { r.tls = true } }

// WithoutETag leaves out ETag, so that clients rely on Last-Modified.
func WithoutETag() Option { return func(r *Repo) { r.noETag = true } }

// WithAbsoluteURLs lists archives by absolute URL rather than relative to the repository.
func WithAbsoluteURLs() Option { return func(r *Repo) { r.absolute = true } }

// WithArchivesAt lists archives at base + "/charts/<name>-<version>.tgz" (another
// server, e.g. another Repo's URL holding the same charts).
func WithArchivesAt(base string) Option {
	return func(r *Repo) { r.archiveBase = strings.TrimRight(base, "/") }
}

// NewRepo serves an empty repository.
func NewRepo(t ociregistry.T, opts ...Option) *Repo {
	t.Helper()
	r := &Repo{t: t, path: repoPath, archives: map[string][]byte{}, versions: map[string]map[string]indexVersion{}}
	for _, o := range opts {
		o(r)
	}
	r.server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	// Connections that tests cut on purpose would otherwise be logged.
	r.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	if r.tls {
		r.server.StartTLS()
	} else {
		r.server.Start()
	}
	t.Cleanup(r.server.Close)
	r.mu.Lock()
	r.regenerate()
	r.mu.Unlock()
	return r
}

// URL is the repository's address, as a HelmSync's spec.source.repoURL.
func (r *Repo) URL() string { return r.server.URL + r.path }

// CA is the PEM certificate a client must trust (nil without WithTLS).
func (r *Repo) CA() []byte {
	if r.server.Certificate() == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.server.Certificate().Raw})
}

// Close stops the server (the test's end does too).
func (r *Repo) Close() { r.server.Close() }

// Add packages ch and lists it in the index, replacing the same version.
func (r *Repo) Add(ch *chart.Chart) {
	r.t.Helper()
	r.add(ch.Name(), ch.Metadata.Version, ch.Metadata.APIVersion, Package(r.t, ch))
}

// AddArchive lists data, served as it is, as chart name at version: for archives that
// `helm package` would never write.
func (r *Repo) AddArchive(name, version string, data []byte) {
	r.t.Helper()
	r.add(name, version, chart.APIVersionV2, data)
}

func (r *Repo) add(name, version, apiVersion string, data []byte) {
	file := fmt.Sprintf("charts/%s-%s.tgz", name, version)
	sum := sha256.Sum256(data)
	r.mu.Lock()
	defer r.mu.Unlock()
	url := file
	switch {
	case r.archiveBase != "":
		url = r.archiveBase + "/" + file
	case r.absolute:
		url = r.URL() + "/" + file
	}
	r.archives[file] = data
	if r.versions[name] == nil {
		r.versions[name] = map[string]indexVersion{}
	}
	r.versions[name][version] = indexVersion{
		APIVersion: apiVersion, Name: name, Version: version,
		URLs: []string{url}, Digest: hex.EncodeToString(sum[:]), Created: modTime(),
	}
	r.regenerate()
}

// TamperArchives makes later archive downloads answer with byte 4 changed (the gzip
// header's time): the archive still loads but no longer matches its digest.
func (r *Repo) TamperArchives() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tamper = true
}

// regenerate writes index.yaml from the versions, with a new ETag and a Last-Modified
// later than the last one.
func (r *Repo) regenerate() {
	entries := map[string][]indexVersion{}
	for name, versions := range r.versions {
		for _, v := range versions {
			entries[name] = append(entries[name], v)
		}
		slices.SortFunc(entries[name], func(a, b indexVersion) int { return strings.Compare(b.Version, a.Version) })
	}
	index, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "entries": entries, "generated": modTime()})
	if err != nil {
		r.t.Fatalf("helmrepo: index: %v", err)
	}
	sum := sha256.Sum256(index)
	r.index = index
	r.etag = `"` + hex.EncodeToString(sum[:8]) + `"`
	next := time.Now().UTC().Truncate(time.Second)
	if !next.After(r.modified) {
		next = r.modified.Add(time.Second)
	}
	r.modified = next
}

// IndexGets is the number of GETs of index.yaml, answered 200 or 304.
func (r *Repo) IndexGets() int { return r.count(&r.indexGets) }

// IndexBodies is the number of GETs of index.yaml answered with the index (200).
func (r *Repo) IndexBodies() int { return r.count(&r.indexBodies) }

// ArchiveGets is the number of GETs of archives.
func (r *Repo) ArchiveGets() int { return r.count(&r.archiveGets) }

// RequestsWithCredentials is the number of requests that carried an Authorization
// header, right or wrong.
func (r *Repo) RequestsWithCredentials() int { return r.count(&r.withAuth) }

func (r *Repo) count(n *int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *n
}

func (r *Repo) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Header.Get("Authorization") != "" {
		r.withAuth++
	}
	if !r.authorized(req) {
		w.Header().Set("WWW-Authenticate", `Basic realm="helmrepo"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	file, ok := strings.CutPrefix(req.URL.Path, r.path+"/")
	if !ok || req.Method != http.MethodGet {
		http.NotFound(w, req)
		return
	}
	if file == "index.yaml" {
		r.serveIndex(w, req)
		return
	}
	data, ok := r.archives[file]
	if !ok {
		http.NotFound(w, req)
		return
	}
	r.archiveGets++
	if r.tamper {
		data = slices.Clone(data)
		data[4] ^= 0xff
	}
	w.Header().Set("Content-Type", "application/gzip")
	_, _ = w.Write(data)
}

func (r *Repo) serveIndex(w http.ResponseWriter, req *http.Request) {
	r.indexGets++
	w.Header().Set("Last-Modified", r.modified.Format(http.TimeFormat))
	if !r.noETag {
		w.Header().Set("ETag", r.etag)
		if req.Header.Get("If-None-Match") == r.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	// If-Modified-Since counts only without If-None-Match (RFC 9110, 13.1.3).
	since, err := http.ParseTime(req.Header.Get("If-Modified-Since"))
	if req.Header.Get("If-None-Match") == "" && err == nil && !r.modified.After(since) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	r.indexBodies++
	w.Header().Set("Content-Type", "application/x-yaml")
	_, _ = w.Write(r.index)
}

func (r *Repo) authorized(req *http.Request) bool {
	if r.user == "" && r.pass == "" {
		return true
	}
	user, pass, ok := req.BasicAuth()
	return ok &&
		subtle.ConstantTimeCompare([]byte(user), []byte(r.user)) == 1 &&
		subtle.ConstantTimeCompare([]byte(pass), []byte(r.pass)) == 1
}
