package alertreceiver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// Status is one commit status a Git host was sent.
type Status struct {
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
}

// GitHub stands in for GitHub Enterprise's statuses API on loopback: POST
// /api/v3/repos/OWNER/REPO/statuses/SHA with the bearer token it was given. It keeps the
// statuses of each commit, in order.
type GitHub struct {
	*httptest.Server
	token string

	mu       sync.Mutex
	statuses map[string][]Status
	refused  []string
}

// NewGitHub starts the stand-in until the test ends.
func NewGitHub(t testing.TB, token string) *GitHub {
	t.Helper()
	g := &GitHub{token: token, statuses: map[string][]Status{}}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	return g
}

// RepoURL is the web URL of a repository of the stand-in, an AlertProvider's address.
func (g *GitHub) RepoURL(owner, repo string) string { return g.URL + "/" + owner + "/" + repo }

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v3/repos/"), "/")
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Method != http.MethodPost || len(parts) != 4 || parts[2] != "statuses" {
		g.refused = append(g.refused, r.Method+" "+r.URL.Path)
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		g.refused = append(g.refused, "unauthorized "+r.URL.Path)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var s Status
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		g.refused = append(g.refused, err.Error())
		w.WriteHeader(http.StatusUnprocessableEntity)
		return
	}
	g.statuses[parts[3]] = append(g.statuses[parts[3]], s)
	w.WriteHeader(http.StatusCreated)
}

// Statuses are the statuses sent for a commit, in order.
func (g *GitHub) Statuses(sha string) []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Status(nil), g.statuses[sha]...)
}

// WaitFor waits until the commit's latest status is state, and returns it; it fails the
// test on a request the stand-in refused.
func (g *GitHub) WaitFor(t testing.TB, sha, state string) Status {
	t.Helper()
	var last Status
	testfleet.Eventually(t, 60*time.Second, fmt.Sprintf("commit %s %s", sha[:7], state), func() (bool, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.refused) > 0 {
			return false, fmt.Errorf("the stand-in refused: %v", g.refused)
		}
		s := g.statuses[sha]
		if len(s) == 0 {
			return false, nil
		}
		last = s[len(s)-1]
		return last.State == state, nil
	})
	return last
}
