// Package infrahubtest is an in-process test double of the Infrahub HTTP API
// as the operator's Infrahub client contract describes it: GraphQL listing
// of CoreArtifact by name, the ArtifactIDs stored query, artifact and storage
// downloads, token and username/password authentication, branches, time
// travel with `at`, and fault injection. Infrahub itself (Python + Neo4j)
// cannot run in unit tests, so this server reproduces the observable
// behaviour a client depends on: paths, envelopes and status codes.
package infrahubtest

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	mainBranch      = "main"
	refreshTokenTTL = 30 * 24 * time.Hour
	// storedQueryName is the only stored query the double knows: the one the
	// original Vidra called.
	storedQueryName = "ArtifactIDs"
)

// Options configure a Server.
type Options struct {
	TLS            bool              // serve HTTPS (httptest.NewTLSServer); CACertPEM returns the cert
	Token          string            // API token accepted in header X-INFRAHUB-KEY ("" = none accepted)
	Users          map[string]string // username -> password for /api/auth/login
	AllowAnonymous bool              // unauthenticated reads succeed (Infrahub's default); false -> 401 "Authentication is required"
	AccessTokenTTL time.Duration     // default 1h
	Now            func() time.Time  // clock; default time.Now
}

// Artifact is one CoreArtifact node as the double stores it.
type Artifact struct {
	ID          string
	Name        string // artifact name (the definition's artifact_name; not unique)
	Status      string // "" means "Ready"
	ContentType string // "" means "application/yaml"
	Content     string
	// Checksum "" means md5 hex of Content; set another value to simulate a
	// stored checksum that does not match the content.
	Checksum  string
	StorageID string // "" means "stor-"+ID
	// The `object` relation: id, display_label, __typename.
	TargetID, TargetLabel, TargetKind string
	// The `definition` relation: id and name.
	DefinitionID, DefinitionName string
}

// withDefaults fills the documented defaults so every reader sees the same
// values the HTTP API serves.
func (a Artifact) withDefaults() Artifact {
	if a.Status == "" {
		a.Status = "Ready"
	}
	if a.ContentType == "" {
		a.ContentType = "application/yaml"
	}
	if a.Checksum == "" {
		sum := md5.Sum([]byte(a.Content))
		a.Checksum = hex.EncodeToString(sum[:])
	}
	if a.StorageID == "" {
		a.StorageID = "stor-" + a.ID
	}
	return a
}

// Fault makes the server misbehave on matching requests. It is applied before
// authentication. When several answers are set, Body wins over GraphQLErrors,
// which wins over Status; Delay alone delays a normal answer.
type Fault struct {
	Path string // prefix of URL paths it applies to, e.g. "/graphql" or "/api/artifact/"; "" = every path
	// Status answers with this HTTP status and the REST error envelope (for
	// /graphql a {"errors":["..."]} body) instead of serving.
	Status int
	// Message is the error text used with Status; "" means the status text.
	Message string
	// GraphQLErrors: for /graphql answer HTTP 200 with {"data":null,"errors":[...]};
	// for /api/query/ answer 502 as Infrahub does when a stored query fails.
	GraphQLErrors []string
	Delay         time.Duration // sleep before answering; ends early when the request context ends
	Body          string        // answer 200 with this raw body (e.g. not JSON) instead of serving
	Trickle       time.Duration // send the answer's body a byte at a time, this far apart, as a trickling server does
	Times         int           // apply to this many requests then clear itself; 0 = until replaced
}

func (f Fault) active() bool {
	return f.Status != 0 || len(f.GraphQLErrors) > 0 || f.Delay > 0 || f.Body != "" || f.Trickle > 0
}

// snapshot is the whole artifact set of a branch from time at on.
type snapshot struct {
	at   time.Time
	arts map[string]Artifact
}

type accessToken struct {
	expires time.Time
	revoked bool // set by ExpireAccessTokens
}

// Server is a running Infrahub test double. All methods are safe for
// concurrent use.
type Server struct {
	opts Options
	ts   *httptest.Server

	mu        sync.Mutex
	branches  map[string][]snapshot // append-only history per branch
	downloads map[string]int
	total     int
	logins    int
	refreshes int
	graphql   int
	access    map[string]accessToken
	refresh   map[string]time.Time // refresh token -> expiry
	fault     Fault
	faultLeft int
}

// New starts a server with an empty branch "main".
func New(opts Options) *Server {
	if opts.AccessTokenTTL <= 0 {
		opts.AccessTokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:      opts,
		branches:  map[string][]snapshot{mainBranch: {{at: opts.Now(), arts: map[string]Artifact{}}}},
		downloads: map[string]int{},
		access:    map[string]accessToken{},
		refresh:   map[string]time.Time{},
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	if opts.TLS {
		s.ts.StartTLS()
	} else {
		s.ts.Start()
	}
	return s
}

// URL is the base URL, without a trailing slash.
func (s *Server) URL() string { return s.ts.URL }

// Close stops the server, waiting for requests in flight.
func (s *Server) Close() { s.ts.Close() }

// Client returns httptest's client, which trusts the TLS certificate.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// CACertPEM is the PEM of the TLS certificate, nil without TLS.
func (s *Server) CACertPEM() []byte {
	cert := s.ts.Certificate()
	if cert == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// CreateBranch creates a branch starting with a copy of main's current
// artifacts, keeping their IDs as Infrahub does. It panics if the branch
// already exists.
func (s *Server) CreateBranch(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.branches[name]; ok {
		panic("infrahubtest: branch " + name + " already exists")
	}
	s.branches[name] = []snapshot{{at: s.opts.Now(), arts: s.currentLocked(mainBranch)}}
}

// Put creates or replaces artifacts (by ID) on a branch, as one change: a fleet's
// thousands of artifacts put one by one would keep a snapshot of the branch for each.
// It panics on an unknown branch.
func (s *Server) Put(branch string, arts ...Artifact) {
	s.mutate(branch, func(current map[string]Artifact) {
		for _, a := range arts {
			current[a.ID] = a.withDefaults()
		}
	})
}

// Delete removes an artifact from a branch. It panics on an unknown branch.
func (s *Server) Delete(branch, id string) {
	s.mutate(branch, func(arts map[string]Artifact) { delete(arts, id) })
}

// mutate records a new snapshot so that earlier states stay visible to `at`.
func (s *Server) mutate(branch string, change func(map[string]Artifact)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.branches[branch]; !ok {
		panic("infrahubtest: unknown branch " + branch)
	}
	arts := s.currentLocked(branch)
	change(arts)
	s.branches[branch] = append(s.branches[branch], snapshot{at: s.opts.Now(), arts: arts})
}

// currentLocked returns a copy of the newest artifact set of a branch.
func (s *Server) currentLocked(branch string) map[string]Artifact {
	hist := s.branches[branch]
	out := map[string]Artifact{}
	if len(hist) > 0 {
		for id, a := range hist[len(hist)-1].arts {
			out[id] = a
		}
	}
	return out
}

// Artifact returns the current state of an artifact, defaults filled.
func (s *Server) Artifact(branch, id string) (Artifact, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hist := s.branches[branch]
	if len(hist) == 0 {
		return Artifact{}, false
	}
	a, ok := hist[len(hist)-1].arts[id]
	return a, ok
}

// Downloads counts successful GET /api/artifact/{id} answers for id, on all
// branches.
func (s *Server) Downloads(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads[id]
}

// TotalDownloads counts all successful GET /api/artifact/{id} answers.
func (s *Server) TotalDownloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Logins counts successful /api/auth/login calls.
func (s *Server) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// Refreshes counts successful /api/auth/refresh calls.
func (s *Server) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshes
}

// GraphQLRequests counts every request received on /graphql or
// /graphql/{branch}, whatever its outcome (faults and errors included), so a
// test can assert how many calls a client made.
func (s *Server) GraphQLRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.graphql
}

// ExpireAccessTokens makes every access token issued so far expired; refresh
// tokens stay valid.
func (s *Server) ExpireAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, at := range s.access {
		at.revoked = true
		s.access[tok] = at
	}
}

// SetFault replaces the current fault; the zero Fault removes it.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.GraphQLErrors = append([]string(nil), f.GraphQLErrors...)
	s.fault = f
	s.faultLeft = f.Times
}

// takeFault returns the fault that applies to path, consuming one use.
func (s *Server) takeFault(path string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fault
	if !f.active() || !strings.HasPrefix(path, f.Path) {
		return Fault{}, false
	}
	if f.Times > 0 {
		s.faultLeft--
		if s.faultLeft <= 0 {
			s.fault = Fault{}
		}
	}
	return f, true
}

// artifactsAt is the artifact set of a branch at a time (the newest snapshot
// not after it), or the current one when at is not set. ok is false for an
// unknown branch.
func (s *Server) artifactsAt(branch string, at time.Time, hasAt bool) map[string]Artifact {
	s.mu.Lock()
	defer s.mu.Unlock()
	hist, ok := s.branches[branch]
	if !ok {
		return nil
	}
	if !hasAt {
		return hist[len(hist)-1].arts
	}
	// Scan by recording order rather than by time so that a fake clock that
	// repeats a value still yields the latest change made at that time.
	for i := len(hist) - 1; i >= 0; i-- {
		if !hist[i].at.After(at) {
			return hist[i].arts
		}
	}
	return map[string]Artifact{}
}

func (s *Server) branchExists(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.branches[name]
	return ok
}

// ---- HTTP ----

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	isGraphQL := path == "/graphql" || strings.HasPrefix(path, "/graphql/")
	if isGraphQL {
		s.mu.Lock()
		s.graphql++
		s.mu.Unlock()
	}
	if f, ok := s.takeFault(path); ok {
		if f.Trickle > 0 {
			w = &trickleWriter{ResponseWriter: w, every: f.Trickle, done: r.Context().Done()}
		}
		if s.applyFault(w, r, f, isGraphQL) {
			return
		}
	}
	switch {
	case path == "/api/auth/login":
		s.handleLogin(w, r)
	case path == "/api/auth/refresh":
		s.handleRefresh(w, r)
	case isGraphQL:
		s.handleGraphQL(w, r, strings.TrimPrefix(strings.TrimPrefix(path, "/graphql"), "/"))
	case strings.HasPrefix(path, "/api/query/"):
		s.handleStoredQuery(w, r, strings.TrimPrefix(path, "/api/query/"))
	case strings.HasPrefix(path, "/api/artifact/"):
		s.handleDownload(w, r, strings.TrimPrefix(path, "/api/artifact/"))
	case strings.HasPrefix(path, "/api/storage/object/"):
		s.handleStorage(w, r, strings.TrimPrefix(path, "/api/storage/object/"))
	default:
		writeRESTError(w, http.StatusNotFound, "Not Found")
	}
}

// applyFault answers a faulted request; false means "serve normally" (a
// delay-only fault, after its delay).
func (s *Server) applyFault(w http.ResponseWriter, r *http.Request, f Fault, isGraphQL bool) bool {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-r.Context().Done():
			t.Stop()
			return true // the client is gone; nothing to answer
		case <-t.C:
		}
	}
	switch {
	case f.Body != "":
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, f.Body)
	case len(f.GraphQLErrors) > 0:
		if strings.HasPrefix(r.URL.Path, "/api/query/") {
			msgs := make([]any, len(f.GraphQLErrors))
			for i, m := range f.GraphQLErrors {
				msgs[i] = graphQLError{Message: m, Locations: []location{{Line: 1, Column: 1}}}
			}
			writeRESTErrors(w, http.StatusBadGateway, msgs)
			return true
		}
		errs := make([]graphQLError, len(f.GraphQLErrors))
		for i, m := range f.GraphQLErrors {
			errs[i] = graphQLError{Message: m, Locations: []location{{Line: 2, Column: 3}}, Path: []any{"CoreArtifact"}}
		}
		writeJSON(w, http.StatusOK, graphQLResponse{Errors: errs})
	case f.Status != 0:
		msg := f.Message
		if msg == "" {
			msg = http.StatusText(f.Status)
		}
		if isGraphQL {
			writeJSON(w, f.Status, stringErrors{Errors: []string{msg}})
		} else {
			writeRESTError(w, f.Status, msg)
		}
	default:
		return false
	}
	return true
}

// authenticate applies Infrahub's order: API key first, then the bearer
// access token, then anonymous access. Outside GraphQL, anonymous access only
// covers GET and OPTIONS (Infrahub's get_current_user), so an anonymous POST
// to /api/query is refused even with AllowAnonymous.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, isGraphQL bool) bool {
	if key := r.Header.Get("X-INFRAHUB-KEY"); key != "" {
		if s.opts.Token != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.opts.Token)) == 1 {
			return true
		}
		writeRESTError(w, http.StatusUnauthorized, "Invalid token")
		return false
	}
	if tok, ok := bearer(r); ok {
		s.mu.Lock()
		at, found := s.access[tok]
		now := s.opts.Now()
		s.mu.Unlock()
		switch {
		case !found:
			writeRESTError(w, http.StatusUnauthorized, "Invalid token")
			return false
		case at.revoked || !now.Before(at.expires):
			writeRESTError(w, http.StatusUnauthorized, "Expired Signature")
			return false
		}
		return true
	}
	if s.opts.AllowAnonymous && (isGraphQL || r.Method == http.MethodGet || r.Method == http.MethodOptions) {
		return true
	}
	writeRESTError(w, http.StatusUnauthorized, "Authentication is required")
	return false
}

// bearer extracts a Bearer credential; another scheme counts as none, as
// with FastAPI's HTTPBearer(auto_error=False).
func bearer(r *http.Request) (string, bool) {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeRESTError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	var body struct {
		Username *string `json:"username"`
		Password *string `json:"password"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Username == nil || body.Password == nil {
		writeRESTError(w, http.StatusUnprocessableEntity, "username and password are required")
		return
	}
	want, ok := s.opts.Users[*body.Username]
	if !ok {
		writeRESTError(w, http.StatusNotFound, "That login user doesn't exist in the system")
		return
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(*body.Password)) != 1 {
		writeRESTError(w, http.StatusUnauthorized, "Incorrect password")
		return
	}
	access, refresh := newToken(), newToken()
	s.mu.Lock()
	now := s.opts.Now()
	s.access[access] = accessToken{expires: now.Add(s.opts.AccessTokenTTL)}
	s.refresh[refresh] = now.Add(refreshTokenTTL)
	s.logins++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"access_token": access, "refresh_token": refresh})
}

func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeRESTError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	tok, ok := bearer(r)
	if !ok {
		writeRESTError(w, http.StatusUnauthorized, "A JWT refresh token is required to perform this operation.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	expires, found := s.refresh[tok]
	switch {
	case !found:
		writeRESTError(w, http.StatusUnauthorized, "Invalid token")
		return
	case !now.Before(expires):
		writeRESTError(w, http.StatusUnauthorized, "Expired Signature")
		return
	}
	access := newToken()
	s.access[access] = accessToken{expires: now.Add(s.opts.AccessTokenTTL)}
	s.refreshes++
	writeJSON(w, http.StatusOK, map[string]string{"access_token": access})
}

// branchAndAt reads the REST `branch` and `at` query parameters, answering
// 400 for an unknown branch or a bad time.
func (s *Server) branchAndAt(w http.ResponseWriter, r *http.Request) (branch string, at time.Time, hasAt, ok bool) {
	q := r.URL.Query()
	branch = q.Get("branch")
	if branch == "" {
		branch = mainBranch
	}
	if !s.branchExists(branch) {
		writeRESTError(w, http.StatusBadRequest, "Branch: "+branch+" not found.")
		return "", time.Time{}, false, false
	}
	at, hasAt, ok = s.parseAtParam(w, r)
	return branch, at, hasAt, ok
}

func (s *Server) parseAtParam(w http.ResponseWriter, r *http.Request) (time.Time, bool, bool) {
	raw := r.URL.Query().Get("at")
	at, hasAt, err := parseAt(raw, s.opts.Now())
	if err != nil {
		writeRESTError(w, http.StatusBadRequest, "Invalid time format for "+raw)
		return time.Time{}, false, false
	}
	return at, hasAt, true
}

func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request, id string) {
	if id == "" || strings.Contains(id, "/") {
		writeRESTError(w, http.StatusNotFound, "Not Found")
		return
	}
	if r.Method != http.MethodGet {
		writeRESTError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if !s.authenticate(w, r, false) {
		return
	}
	branch, at, hasAt, ok := s.branchAndAt(w, r)
	if !ok {
		return
	}
	arts := s.artifactsAt(branch, at, hasAt)
	a, found := arts[id]
	if !found {
		writeRESTError(w, http.StatusNotFound, fmt.Sprintf("Unable to find the node %s / CoreArtifact in the database.", id))
		return
	}
	// Count before answering so a test that saw the response also sees the count.
	s.mu.Lock()
	s.downloads[id]++
	s.total++
	s.mu.Unlock()
	w.Header().Set("Content-Type", a.ContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, a.Content)
}

func (s *Server) handleStorage(w http.ResponseWriter, r *http.Request, storageID string) {
	if storageID == "" || strings.Contains(storageID, "/") {
		writeRESTError(w, http.StatusNotFound, "Not Found")
		return
	}
	if r.Method != http.MethodGet {
		writeRESTError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if !s.authenticate(w, r, false) {
		return
	}
	arts := s.artifactsAt(mainBranch, time.Time{}, false)
	for _, a := range arts {
		if a.StorageID == storageID {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, a.Content)
			return
		}
	}
	writeRESTError(w, http.StatusNotFound, "Unable to find the object "+storageID+" in the storage.")
}

func (s *Server) handleStoredQuery(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" || strings.Contains(name, "/") {
		writeRESTError(w, http.StatusNotFound, "Not Found")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeRESTError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if !s.authenticate(w, r, false) {
		return
	}
	branch, at, hasAt, ok := s.branchAndAt(w, r)
	if !ok {
		return
	}
	if name != storedQueryName {
		writeRESTError(w, http.StatusNotFound, fmt.Sprintf("Unable to find the node %s / CoreGraphQLQuery in the database.", name))
		return
	}
	vars := map[string]string{}
	if r.Method == http.MethodPost {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			writeRESTError(w, http.StatusBadRequest, "unable to read the request body")
			return
		}
		// The body is optional; when present its variables must be strings.
		if len(strings.TrimSpace(string(raw))) > 0 {
			var body struct {
				Variables map[string]string `json:"variables"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				writeRESTError(w, http.StatusUnprocessableEntity, "invalid body: "+err.Error())
				return
			}
			for k, v := range body.Variables {
				vars[k] = v
			}
		}
	} else {
		for k, v := range r.URL.Query() {
			switch k {
			case "branch", "at", "update_group", "subscribers":
			default:
				vars[k] = v[0]
			}
		}
	}
	artifactName, set := vars["artifactname"]
	if !set {
		writeRESTErrors(w, http.StatusBadGateway, []any{graphQLError{
			Message:   "Variable '$artifactname' of required type 'String!' was not provided.",
			Locations: []location{{Line: 1, Column: 19}},
		}})
		return
	}
	arts := s.artifactsAt(branch, at, hasAt)
	var edges []storedEdge
	for _, a := range sortedArtifacts(arts) {
		if a.Name != artifactName {
			continue
		}
		n := storedNode{ID: a.ID, Name: valueField{a.Name}, Checksum: valueField{a.Checksum}, Status: valueField{a.Status}}
		n.StorageID.ID = a.StorageID
		n.Object.Node = objectOf(a)
		edges = append(edges, storedEdge{Node: n})
	}
	if edges == nil {
		edges = []storedEdge{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"data": map[string]any{"CoreArtifact": map[string]any{"count": len(edges), "edges": edges}},
	})
}

// Patterns of the small part of GraphQL the double understands: the name filters of
// CoreArtifact (as a variable or a literal), and the first field of a query.
var (
	valuesVarRE  = regexp.MustCompile(`name__values\s*:\s*\$(\w+)`)
	valueVarRE   = regexp.MustCompile(`name__value\s*:\s*\$(\w+)`)
	valuesLitRE  = regexp.MustCompile(`name__values\s*:\s*\[([^\]]*)\]`)
	valueLitRE   = regexp.MustCompile(`name__value\s*:\s*("(?:[^"\\]|\\.)*")`)
	stringLitRE  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	firstFieldRE = regexp.MustCompile(`\{\s*([A-Za-z_]\w*)`)
)

// intVariable is the value of the CoreArtifact argument arg (offset or limit) when it is
// given as a variable or a literal; 0 when absent.
func intVariable(query, arg string, vars map[string]any) int {
	m := regexp.MustCompile(`\b` + arg + `\s*:\s*(\$\w+|\d+)`).FindStringSubmatch(query)
	if m == nil {
		return 0
	}
	if !strings.HasPrefix(m[1], "$") {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if f, ok := vars[m[1][1:]].(float64); ok {
		return int(f)
	}
	return 0
}

func (s *Server) handleGraphQL(w http.ResponseWriter, r *http.Request, branch string) {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, stringErrors{Errors: []string{"Method Not Allowed"}})
		return
	}
	if !s.authenticate(w, r, true) {
		return
	}
	// The branch comes from the path only; ?branch= is ignored like Infrahub does.
	if branch == "" {
		branch = mainBranch
	}
	if !s.branchExists(branch) {
		writeJSON(w, http.StatusNotFound, stringErrors{Errors: []string{"Branch: " + branch + " not found."}})
		return
	}
	at, hasAt, ok := s.parseAtParam(w, r)
	if !ok {
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeJSON(w, http.StatusBadRequest, stringErrors{Errors: []string{"Unsupported Media Type. Must be application/json"}})
		return
	}
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, stringErrors{Errors: []string{"Unable to parse request body as JSON"}})
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		writeJSON(w, http.StatusBadRequest, stringErrors{Errors: []string{"No GraphQL query found in the request"}})
		return
	}
	if branchQuery.MatchString(req.Query) {
		s.writeBranches(w)
		return
	}
	if !strings.Contains(req.Query, "CoreArtifact") {
		writeJSON(w, http.StatusOK, graphQLResponse{Errors: []graphQLError{unknownField(req.Query)}})
		return
	}
	filter, gqlErr := nameFilter(req.Query, req.Variables)
	if gqlErr != nil {
		writeJSON(w, http.StatusOK, graphQLResponse{Errors: []graphQLError{*gqlErr}})
		return
	}
	arts := s.artifactsAt(branch, at, hasAt)
	edges := []gqlEdge{}
	for _, a := range sortedArtifacts(arts) {
		if filter != nil && !filter[a.Name] {
			continue
		}
		n := gqlNode{
			ID: a.ID, Name: valueField{a.Name}, Status: valueField{a.Status}, Checksum: valueField{a.Checksum},
			StorageID: valueField{a.StorageID}, ContentType: valueField{a.ContentType},
		}
		n.Object.Node = objectOf(a)
		if a.DefinitionID != "" || a.DefinitionName != "" {
			n.Definition.Node = &definitionNode{ID: a.DefinitionID, Name: valueField{a.DefinitionName}}
		}
		edges = append(edges, gqlEdge{Node: n})
	}
	// count is the total; offset and limit page the edges, as Infrahub does.
	count := len(edges)
	if off := intVariable(req.Query, "offset", req.Variables); off > 0 {
		edges = edges[min(off, len(edges)):]
	}
	if lim := intVariable(req.Query, "limit", req.Variables); lim > 0 && lim < len(edges) {
		edges = edges[:lim]
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"data": map[string]any{"CoreArtifact": map[string]any{"count": count, "edges": edges}},
	})
}

// branchQuery is a query of Infrahub's branches: `query { Branch { name } }`.
var branchQuery = regexp.MustCompile(`^\s*(query\s*(\w+\s*)?)?\{\s*Branch\s*\{`)

// writeBranches answers a branch query with every branch's name, as Infrahub's Branch
// query does: a list, not edges.
func (s *Server) writeBranches(w http.ResponseWriter) {
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.branches))
	s.mu.Unlock()
	list := make([]map[string]any, 0, len(names))
	for _, n := range names {
		list = append(list, map[string]any{"name": n, "is_default": n == mainBranch})
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"Branch": list}})
}

// nameFilter returns the set of names selected by name__values / name__value
// (literal or variable), nil when the query does not filter by name. Variable
// errors mimic graphql-core so that a client passing the wrong variable name
// fails loudly instead of listing everything.
func nameFilter(query string, vars map[string]any) (map[string]bool, *graphQLError) {
	var filter map[string]bool
	add := func(names ...string) {
		set := map[string]bool{}
		for _, n := range names {
			set[n] = true
		}
		if filter == nil {
			filter = set
			return
		}
		for n := range filter { // several filters combine with AND
			if !set[n] {
				delete(filter, n)
			}
		}
	}
	for _, spec := range []struct {
		re   *regexp.Regexp
		list bool
	}{{valuesVarRE, true}, {valueVarRE, false}} {
		m := spec.re.FindStringSubmatch(query)
		if m == nil {
			continue
		}
		names, present, err := variableStrings(query, m[1], vars, spec.list)
		if err != nil {
			return nil, err
		}
		if present {
			add(names...)
		}
	}
	if m := valuesLitRE.FindStringSubmatch(query); m != nil {
		var names []string
		for _, lit := range stringLitRE.FindAllString(m[1], -1) {
			var s string
			if json.Unmarshal([]byte(lit), &s) == nil {
				names = append(names, s)
			}
		}
		add(names...)
	}
	if m := valueLitRE.FindStringSubmatch(query); m != nil {
		var s string
		if json.Unmarshal([]byte(m[1]), &s) == nil {
			add(s)
		}
	}
	return filter, nil
}

// variableStrings resolves $name: present=false means the argument is
// omitted (an unset nullable variable), which GraphQL treats as no filter.
func variableStrings(query, name string, vars map[string]any, list bool) (names []string, present bool, gqlErr *graphQLError) {
	decl := regexp.MustCompile(`\$` + regexp.QuoteMeta(name) + `\s*:\s*([\[\]\w!]+)`).FindStringSubmatch(query)
	if decl == nil {
		e := graphQLError{Message: fmt.Sprintf("Variable '$%s' is not defined.", name), Locations: []location{locate(query, "$"+name)}}
		return nil, false, &e
	}
	typ := decl[1]
	v, set := vars[name]
	if !set || v == nil {
		if strings.HasSuffix(typ, "!") {
			e := graphQLError{
				Message:   fmt.Sprintf("Variable '$%s' of required type '%s' was not provided.", name, typ),
				Locations: []location{locate(query, "$"+name)},
			}
			return nil, false, &e
		}
		return nil, false, nil
	}
	bad := func() *graphQLError {
		raw, _ := json.Marshal(v)
		e := graphQLError{
			Message:   fmt.Sprintf("Variable '$%s' got invalid value %s; String cannot represent a non string value.", name, raw),
			Locations: []location{locate(query, "$"+name)},
		}
		return &e
	}
	switch x := v.(type) {
	case string:
		// GraphQL coerces a single value into a one-element list.
		return []string{x}, true, nil
	case []any:
		if !list {
			return nil, false, bad()
		}
		for _, item := range x {
			str, ok := item.(string)
			if !ok {
				return nil, false, bad()
			}
			names = append(names, str)
		}
		return names, true, nil
	default:
		return nil, false, bad()
	}
}

// unknownField builds graphql-core's validation error for a top-level field
// the double does not serve.
func unknownField(query string) graphQLError {
	m := firstFieldRE.FindStringSubmatchIndex(query)
	if m == nil {
		return graphQLError{Message: "Syntax Error: Expected Name.", Locations: []location{{Line: 1, Column: 1}}}
	}
	field := query[m[2]:m[3]]
	return graphQLError{
		Message:   fmt.Sprintf("Cannot query field '%s' on type 'Query'.", field),
		Locations: []location{position(query, m[2])},
	}
}

func locate(query, needle string) location {
	i := strings.Index(query, needle)
	if i < 0 {
		i = 0
	}
	return position(query, i)
}

// position converts a byte offset into GraphQL's 1-based line and column.
func position(query string, off int) location {
	before := query[:off]
	line := strings.Count(before, "\n") + 1
	col := off - strings.LastIndex(before, "\n")
	return location{Line: line, Column: col}
}

func sortedArtifacts(arts map[string]Artifact) []Artifact {
	out := make([]Artifact, 0, len(arts))
	for _, a := range arts {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func objectOf(a Artifact) *objectNode {
	if a.TargetID == "" && a.TargetLabel == "" && a.TargetKind == "" {
		return nil
	}
	return &objectNode{ID: a.TargetID, DisplayLabel: a.TargetLabel, Typename: a.TargetKind}
}

// ---- wire types ----

type valueField struct {
	Value string `json:"value"`
}

type objectNode struct {
	ID           string `json:"id"`
	DisplayLabel string `json:"display_label"`
	Typename     string `json:"__typename"`
}

type definitionNode struct {
	ID   string     `json:"id"`
	Name valueField `json:"name"`
}

type gqlNode struct {
	ID          string     `json:"id"`
	Name        valueField `json:"name"`
	Status      valueField `json:"status"`
	Checksum    valueField `json:"checksum"`
	StorageID   valueField `json:"storage_id"`
	ContentType valueField `json:"content_type"`
	Object      struct {
		Node *objectNode `json:"node"`
	} `json:"object"`
	Definition struct {
		Node *definitionNode `json:"node"`
	} `json:"definition"`
}

type gqlEdge struct {
	Node gqlNode `json:"node"`
}

// storedNode is the ArtifactIDs stored query's node; storage_id is read with
// key "id" there, as the original operator's query did.
type storedNode struct {
	ID        string     `json:"id"`
	Name      valueField `json:"name"`
	Checksum  valueField `json:"checksum"`
	StorageID struct {
		ID string `json:"id"`
	} `json:"storage_id"`
	Status valueField `json:"status"`
	Object struct {
		Node *objectNode `json:"node"`
	} `json:"object"`
}

type storedEdge struct {
	Node storedNode `json:"node"`
}

type location struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

type graphQLError struct {
	Message   string     `json:"message"`
	Locations []location `json:"locations,omitempty"`
	Path      []any      `json:"path,omitempty"`
}

// graphQLResponse is an errors answer: data is always present and null.
type graphQLResponse struct {
	Data   any            `json:"data"`
	Errors []graphQLError `json:"errors"`
}

// stringErrors is the shape Infrahub's GraphQL app uses for transport-level
// failures (unknown branch, bad content type): strings, no data.
type stringErrors struct {
	Errors []string `json:"errors"`
}

type restError struct {
	Message    any `json:"message"`
	Extensions struct {
		Code int `json:"code"`
	} `json:"extensions"`
}

func writeRESTError(w http.ResponseWriter, status int, msg string) {
	writeRESTErrors(w, status, []any{msg})
}

// writeRESTErrors writes the REST envelope; a message may be an object, as in
// Infrahub's 502 answer for a failing stored query.
func writeRESTErrors(w http.ResponseWriter, status int, msgs []any) {
	errs := make([]restError, len(msgs))
	for i, m := range msgs {
		errs[i].Message = m
		errs[i].Extensions.Code = status
	}
	writeJSON(w, status, struct {
		Data   any         `json:"data"`
		Errors []restError `json:"errors"`
	}{Errors: errs})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic("infrahubtest: " + err.Error()) // only our own wire types are marshalled
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// trickleWriter writes a byte at a time, every apart, until the client goes.
type trickleWriter struct {
	http.ResponseWriter
	every time.Duration
	done  <-chan struct{}
}

func (t *trickleWriter) Write(b []byte) (int, error) {
	for i := range b {
		if _, err := t.ResponseWriter.Write(b[i : i+1]); err != nil {
			return i, err
		}
		_ = http.NewResponseController(t.ResponseWriter).Flush() // best effort: a trickle
		select {
		case <-t.done:
			return i + 1, http.ErrHandlerTimeout
		case <-time.After(t.every):
		}
	}
	return len(b), nil
}
