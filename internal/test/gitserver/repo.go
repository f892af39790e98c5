package gitserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Repo is a bare repository served by a Server.
type Repo struct {
	server *Server
	name   string
	dir    string

	// mu serialises writers: they share the repository's refs, and the
	// commit clock below.
	mu sync.Mutex
	// commits numbers the commits made, so each gets its own fixed
	// timestamp: reproducible, yet two commits of the same tree differ.
	commits int
}

// Repo creates an empty bare repository <root>/<name>.git whose HEAD names
// refs/heads/main.
func (s *Server) Repo(t T, name string) *Repo {
	t.Helper()
	r := &Repo{server: s, name: name, dir: filepath.Join(s.root, name+".git")}
	r.git(t, nil, "", "init", "--quiet", "--bare", r.dir)
	r.git(t, nil, "", "symbolic-ref", "HEAD", "refs/heads/main")
	return r
}

// URL is the repository's clone URL.
func (r *Repo) URL() string { return r.server.URL() + "/" + r.name + ".git" }

// Commit writes files (path → content; "" deletes the path) on top of
// branch's tip and moves the branch to the new commit, which it returns. A
// new branch starts from the tip of HEAD's branch, or from nothing when the
// repository is empty, as `git checkout -b` would.
//
// It writes into the bare repository with plumbing commands rather than
// pushing from a work clone: the result on the server is the same, and it
// is quicker and not counted as traffic.
func (r *Repo) Commit(t T, branch string, files map[string]string, message string) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()

	parent := r.revParse(t, "refs/heads/"+branch)
	if parent == "" {
		parent = r.revParse(t, "HEAD")
	}
	index := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	if parent != "" {
		r.git(t, index, "", "read-tree", parent)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	// --index-info, unlike --add/--force-remove, needs no work tree; mode 0
	// removes the path.
	var info strings.Builder
	for _, p := range paths {
		if files[p] == "" {
			fmt.Fprintf(&info, "0 %040d\t%s\n", 0, p)
			continue
		}
		blob := r.git(t, nil, files[p], "hash-object", "-w", "--stdin")
		fmt.Fprintf(&info, "100644 %s\t%s\n", blob, p)
	}
	r.git(t, index, info.String(), "update-index", "--index-info")
	tree := r.git(t, index, "", "write-tree")

	r.commits++
	date := fmt.Sprintf("GIT_COMMITTER_DATE=%d +0000", 1700000000+r.commits)
	env := []string{date, strings.Replace(date, "COMMITTER", "AUTHOR", 1)}
	args := []string{"commit-tree", tree, "-m", message}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	commit := r.git(t, env, "", args...)
	r.git(t, nil, "", "update-ref", "refs/heads/"+branch, commit)
	return commit
}

// SetRef points the full ref name at commit, as a Git host does for a pull request
// (refs/pull/1/head); "" deletes it.
func (r *Repo) SetRef(t T, name, commit string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if commit == "" {
		r.git(t, nil, "", "update-ref", "-d", name)
		return
	}
	r.git(t, nil, "", "update-ref", name, commit)
}

// Tag points the lightweight tag name at commit.
func (r *Repo) Tag(t T, name, commit string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.git(t, nil, "", "update-ref", "refs/tags/"+name, commit)
}

// TagAnnotated creates the annotated tag name on commit; its tag object has
// its own hash, which ls-remote lists beside the peeled commit.
func (r *Repo) TagAnnotated(t T, name, commit, message string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.git(t, []string{"GIT_COMMITTER_DATE=1700000000 +0000"}, "", "tag", "-a", "-m", message, name, commit)
}

// revParse returns the commit rev names, or "" when it does not exist.
func (r *Repo) revParse(t T, rev string) string {
	t.Helper()
	cmd := r.command(nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// git runs the git binary in the bare repository and returns its trimmed
// standard output, failing the test on error.
func (r *Repo) git(t T, env []string, stdin string, args ...string) string {
	t.Helper()
	cmd := r.command(env, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func (r *Repo) command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Env = append(r.server.gitEnv(), env...)
	if _, err := os.Stat(r.dir); err == nil {
		cmd.Env = append(cmd.Env, "GIT_DIR="+r.dir)
	}
	return cmd
}
