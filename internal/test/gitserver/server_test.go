package gitserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clone runs the real git client against the server, as a user would.
func clone(t *testing.T, s *Server, url, dir string, extra ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"clone", "--quiet"}, append(extra, url, dir)...)...)
	cmd.Env = s.gitEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestCloneSeesCommitsBranchesAndTags(t *testing.T) {
	s := New(t)
	r := s.Repo(t, "app")
	first := r.Commit(t, "main", map[string]string{"a.yaml": "a: 1\n", "dir/b.yaml": "b: 1\n"}, "first")
	second := r.Commit(t, "main", map[string]string{"a.yaml": "", "c.yaml": "c: 1\n"}, "second")
	feature := r.Commit(t, "feature", map[string]string{"f.yaml": "f: 1\n"}, "feature")
	r.Tag(t, "v1.0.0", first)
	r.TagAnnotated(t, "v2.0.0", second, "release 2")

	if len(second) != 40 || first == second {
		t.Fatalf("commits %q and %q should be distinct 40-hex ids", first, second)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	if out, err := clone(t, s, r.URL(), dir); err != nil {
		t.Fatalf("clone: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.yaml")); !os.IsNotExist(err) {
		t.Errorf("a.yaml should have been deleted by the second commit, stat: %v", err)
	}
	for _, f := range []string{"dir/b.yaml", "c.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s missing from main: %v", f, err)
		}
	}

	cmd := exec.Command("git", "ls-remote", r.URL())
	cmd.Env = s.gitEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ls-remote: %v", err)
	}
	for _, want := range []string{
		second + "\trefs/heads/main",
		feature + "\trefs/heads/feature",
		first + "\trefs/tags/v1.0.0",
		second + "\trefs/tags/v2.0.0^{}",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ls-remote lacks %q:\n%s", want, out)
		}
	}
	if got := s.Fetches("app"); got != 1 {
		t.Errorf("Fetches = %d, want 1 (one clone)", got)
	}
	if got := s.Advertisements("app"); got != 2 {
		t.Errorf("Advertisements = %d, want 2 (clone and ls-remote)", got)
	}
}

func TestNewBranchStartsFromHead(t *testing.T) {
	s := New(t)
	r := s.Repo(t, "app")
	r.Commit(t, "main", map[string]string{"base.yaml": "x: 1\n"}, "base")
	r.Commit(t, "topic", map[string]string{"topic.yaml": "y: 1\n"}, "topic")

	dir := filepath.Join(t.TempDir(), "clone")
	if out, err := clone(t, s, r.URL(), dir, "--branch", "topic"); err != nil {
		t.Fatalf("clone: %v: %s", err, out)
	}
	for _, f := range []string{"base.yaml", "topic.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s missing from topic: %v", f, err)
		}
	}
}

func TestBasicAuthRequired(t *testing.T) {
	s := New(t)
	r := s.Repo(t, "private")
	r.Commit(t, "main", map[string]string{"a.yaml": "a: 1\n"}, "first")
	s.RequireBasicAuth("alice", "s3cret")

	if out, err := clone(t, s, r.URL(), filepath.Join(t.TempDir(), "anon")); err == nil {
		t.Fatalf("anonymous clone succeeded: %s", out)
	}
	authed := strings.Replace(r.URL(), "http://", "http://alice:s3cret@", 1)
	if out, err := clone(t, s, authed, filepath.Join(t.TempDir(), "authed")); err != nil {
		t.Fatalf("clone with credentials: %v: %s", err, out)
	}
}
