// Package gitserver runs a real Git smart-HTTP server on loopback for tests:
// git's own http-backend behind net/http/cgi, so clients talk to the same
// protocol implementation as on a Git host, with no fakes.
package gitserver

import (
	"bytes"
	"crypto/subtle"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// T is what the server asks of whoever runs it: a test's testing.TB, or a program's
// stand-in (make demo serves a repository too).
type T interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatalf(format string, args ...any)
	Log(args ...any)
}

// Server serves the bare repositories under one root directory.
type Server struct {
	root string
	http *httptest.Server
	// home isolates the git binary from the user's and the system's config.
	home string

	mu      sync.Mutex
	user    string
	pass    string
	token   string
	posts   map[string]int
	adverts map[string]int
	// held, while set, holds every request until it is closed; holding counts the
	// requests held now, mostHeld the most held at once.
	held     chan struct{}
	holding  int
	mostHeld int
}

// New starts a server on 127.0.0.1; it is closed when the test ends.
func New(t T) *Server {
	t.Helper()
	return start(t, false)
}

// NewTLS is New serving https, with httptest's certificate (CA returns it).
func NewTLS(t T) *Server {
	t.Helper()
	return start(t, true)
}

func start(t T, tls bool) *Server {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	s := &Server{
		root:    t.TempDir(),
		home:    t.TempDir(),
		posts:   map[string]int{},
		adverts: map[string]int{},
	}
	cgiHandler := &cgi.Handler{
		Path: backend,
		Env: append(s.gitEnv(),
			"GIT_PROJECT_ROOT="+s.root,
			"GIT_HTTP_EXPORT_ALL=1",
		),
		Stderr: testWriter{t},
	}
	s.http = httptest.NewUnstartedServer(s.wrap(cgiHandler))
	if tls {
		s.http.StartTLS()
	} else {
		s.http.Start()
	}
	t.Cleanup(s.http.Close)
	return s
}

// CA is the PEM certificate a client of a server made by NewTLS must trust (nil for New).
func (s *Server) CA() []byte {
	if s.http.Certificate() == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.http.Certificate().Raw})
}

// URL is the server's base URL, http(s)://127.0.0.1:PORT.
func (s *Server) URL() string { return s.http.URL }

// Close stops the server early, to test an unreachable remote; it is
// closed at the end of the test anyway.
func (s *Server) Close() { s.http.Close() }

// RequireBasicAuth makes every later request without these credentials fail
// with 401. It may be combined with RequireBearer: either then suffices.
func (s *Server) RequireBasicAuth(user, pass string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user, s.pass = user, pass
}

// RequireBearer makes every later request without this bearer token fail
// with 401 (unless it carries the basic credentials, if those are required).
func (s *Server) RequireBearer(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// Fetches counts the upload-pack POSTs (clones and fetches) served for the
// repository called name (as passed to Repo). Protocol v2 ls-refs POSTs,
// which only list refs, are not counted.
func (s *Server) Fetches(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts[name]
}

// Advertisements counts the upload-pack ref advertisements (GET
// info/refs?service=git-upload-pack, as ls-remote and every clone start with)
// served for the repository called name.
func (s *Server) Advertisements(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adverts[name]
}

// Hold makes every later request wait, unanswered, until release is called (or the
// client gives up): a Git host that answers nothing, for tests of what a slow source
// holds. release is called when the test ends, if not before.
func (s *Server) Hold(t T) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := make(chan struct{})
	s.held = held
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			s.held = nil
			s.mu.Unlock()
			close(held)
		})
	}
	t.Cleanup(release)
	return release
}

// Holding is how many requests are held now; MostHeld the most held at once.
func (s *Server) Holding() (now, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding, s.mostHeld
}

func (s *Server) hold(r *http.Request) {
	s.mu.Lock()
	held := s.held
	if held == nil {
		s.mu.Unlock()
		return
	}
	s.holding++
	s.mostHeld = max(s.mostHeld, s.holding)
	s.mu.Unlock()
	select {
	case <-held:
	case <-r.Context().Done():
	}
	s.mu.Lock()
	s.holding--
	s.mu.Unlock()
}

func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hold(r)
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="gitserver"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		s.count(r)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	s.mu.Lock()
	user, pass, token := s.user, s.pass, s.token
	s.mu.Unlock()
	if user == "" && token == "" {
		return true
	}
	if u, p, ok := r.BasicAuth(); ok && user != "" && equal(u, user) && equal(p, pass) {
		return true
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && token != "" && equal(bearer, token)
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (s *Server) count(r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, ".git/git-upload-pack"):
		if isListRefs(r) {
			return // the advertisement GET before it was counted
		}
		s.posts[strings.TrimSuffix(path, ".git/git-upload-pack")]++
	case r.Method == http.MethodGet && strings.HasSuffix(path, ".git/info/refs") &&
		r.URL.Query().Get("service") == "git-upload-pack":
		s.adverts[strings.TrimSuffix(path, ".git/info/refs")]++
	}
}

// isListRefs tells a protocol v2 ls-refs request (the git binary's way to
// list refs, sent as a POST) from a fetch by peeking at its first pkt-line;
// the body is restored for the backend.
func isListRefs(r *http.Request) bool {
	if !strings.Contains(r.Header.Get("Git-Protocol"), "version=2") || r.Header.Get("Content-Encoding") != "" {
		return false
	}
	head := make([]byte, len("0014command=ls-refs"))
	n, _ := io.ReadFull(r.Body, head)
	head = head[:n]
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return bytes.HasSuffix(head, []byte("command=ls-refs"))
}

// gitEnv pins the git binary's configuration and identity so that commits
// are reproducible and nothing from the host leaks in.
func (s *Server) gitEnv() []string {
	return []string{
		"HOME=" + s.home,
		"PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=Vidra Test",
		"GIT_AUTHOR_EMAIL=test@vidra.invalid",
		"GIT_COMMITTER_NAME=Vidra Test",
		"GIT_COMMITTER_EMAIL=test@vidra.invalid",
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
	}
}

// testWriter sends http-backend's stderr to the test log.
type testWriter struct{ t T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
