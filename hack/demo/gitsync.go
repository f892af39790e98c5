package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-logr/logr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

const (
	// gitSyncName names the demo's GitSync.
	gitSyncName = "demo-settings"
	// gitNamespace is where its bundle lands on the members; the bundle creates it.
	gitNamespace = "demo-git"
	// gitRepoName is the repository the demo serves.
	gitRepoName = "fleet-config"
)

// gitHost lends the demo's Git server what a test would: directories under the demo's,
// cleanups run when the sandbox closes, and a failure, which the step that serves the
// repository returns.
type gitHost struct {
	dir      string
	log      logr.Logger
	dirs     int
	cleanups []func()
	err      error
}

func (g *gitHost) Helper() {}

func (g *gitHost) TempDir() string {
	g.dirs++
	dir := filepath.Join(g.dir, "tmp", strconv.Itoa(g.dirs))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		g.Fatalf("%v", err)
	}
	return dir
}

func (g *gitHost) Cleanup(f func()) { g.cleanups = append(g.cleanups, f) }

func (g *gitHost) Fatalf(format string, args ...any) {
	if g.err == nil {
		g.err = fmt.Errorf(format, args...)
	}
}

func (g *gitHost) Log(args ...any) {
	g.log.V(1).Info(fmt.Sprint(args...), "component", "git-http-backend")
}

func (g *gitHost) close() {
	for i := len(g.cleanups) - 1; i >= 0; i-- {
		g.cleanups[i]()
	}
}

// gitSettings is the repository's one directory: a namespace and the settings of the
// fleet, as a team keeps them in Git.
func gitSettings(logLevel string) map[string]string {
	files := map[string]string{
		"fleet/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + gitNamespace + "\n",
		"fleet/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fleet-settings\n  namespace: " + gitNamespace +
			"\ndata:\n  logLevel: " + logLevel + "\n",
		"README.md": "Fleet settings, delivered by the demo's GitSync from fleet/.\n",
	}
	maps.Copy(files, orderFiles())
	return files
}

// startGitRepo serves a repository over Git's smart HTTP on loopback (git http-backend,
// as a Git host runs it), with one commit on main.
func (s *sandbox) startGitRepo(_ context.Context, log logr.Logger) error {
	dir := filepath.Join(s.dir, "git")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	s.gitHost = &gitHost{dir: dir, log: log}
	s.git = gitserver.New(s.gitHost)
	s.gitRepo = s.git.Repo(s.gitHost, gitRepoName)
	commit := s.gitRepo.Commit(s.gitHost, "main", gitSettings("info"), "fleet settings")
	if s.gitHost.err != nil {
		return s.gitHost.err
	}
	s.gitURL = s.gitRepo.URL()
	fmt.Fprintf(os.Stdout, "    %s serves main at %s\n", s.gitURL, commit[:12])
	return nil
}

// applyGitSync delivers the repository's fleet/ directory to every member of the demo.
func (s *sandbox) applyGitSync(ctx context.Context, _ logr.Logger) error {
	sync := fmt.Sprintf(`apiVersion: infrahub.operators.com/v1alpha1
kind: GitSync
metadata:
  name: %s
spec:
  interval: 30s
  source:
    url: %s
    ref: {branch: main}
    path: fleet
    insecureAllowHTTP: true   # plain http, on loopback only
  destination:
    clusterSelector:
      matchLabels: {demo: "true"}
  previews:
    refs: [refs/heads/preview/*]   # branches previewed on the fleet before they merge
`, gitSyncName, s.gitURL)
	if err := os.WriteFile(filepath.Join(s.dir, "gitsync.yaml"), []byte(sync), 0o600); err != nil {
		return err
	}
	_, err := s.kubectl(ctx, []byte(sync), "apply", "-f", "-")
	return err
}

// waitGitReady waits until the GitSync is Ready with a VidraResource Ready on each
// member.
func (s *sandbox) waitGitReady(ctx context.Context, _ logr.Logger) error {
	return s.waitSyncReady(ctx, "gitsync", gitSyncName, vidrav1alpha1.GitSyncLabel)
}

// showGit prints the GitSync, the commit it delivered and what landed on each member.
func (s *sandbox) showGit(ctx context.Context, out io.Writer) {
	fmt.Fprintln(out, "\n==> kubectl get gitsyncs")
	syncs, _ := s.kubectl(ctx, nil, "get", "gitsyncs")
	fmt.Fprint(out, syncs)
	fmt.Fprintf(out, "\n==> the repository's fleet/ on each member (ConfigMap fleet-settings in %s)\n", gitNamespace)
	for _, m := range s.fleet.Members {
		data, err := s.kubectl(ctx, nil, "--context", m.Name, "get", "configmap", "fleet-settings", "-n", gitNamespace, "-o",
			`jsonpath=logLevel {.data.logLevel}`)
		if err != nil {
			data = err.Error()
		}
		fmt.Fprintf(out, "    %s: %s\n", m.Name, data)
	}
	fmt.Fprintf(out, "    the Git server so far: %s fetched %d, for %d members\n", gitRepoName, s.git.Fetches(gitRepoName), len(s.fleet.Members))
}
