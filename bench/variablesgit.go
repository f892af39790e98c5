package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// gitHost lends the phase's Git server what a test would: directories under one of its
// own, which close removes; cleanups, which close runs; and a failure, which ends the
// server's call where it fails, as a test's Fatalf does, and which try returns.
type gitHost struct {
	dir      string
	log      io.Writer
	logMu    sync.Mutex
	cleanups []func()
}

// gitFailure is what gitHost.Fatalf panics with, for try to recover.
type gitFailure struct{ err error }

func newGitHost(log io.Writer) (*gitHost, error) {
	dir, err := os.MkdirTemp("", "vidra-bench-git-")
	if err != nil {
		return nil, fmt.Errorf("a directory for the Git server: %w", err)
	}
	return &gitHost{dir: dir, log: log}, nil
}

func (g *gitHost) Helper() {}

func (g *gitHost) TempDir() string {
	dir, err := os.MkdirTemp(g.dir, "")
	if err != nil {
		g.Fatalf("a directory for the Git server: %v", err)
	}
	return dir
}

func (g *gitHost) Cleanup(f func()) { g.cleanups = append(g.cleanups, f) }

func (g *gitHost) Fatalf(format string, args ...any) {
	panic(gitFailure{err: fmt.Errorf(format, args...)})
}

// Log is git http-backend's standard error, written as its requests are served.
func (g *gitHost) Log(args ...any) {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	fmt.Fprintln(g.log, append([]any{"    git http-backend:"}, args...)...)
}

// try runs f, which calls the Git server, and returns the failure it met, if any.
func (g *gitHost) try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			failure, ok := r.(gitFailure)
			if !ok {
				panic(r)
			}
			err = failure.err
		}
	}()
	f()
	return nil
}

// close runs the cleanups, the last registered first, and removes the directories.
func (g *gitHost) close() error {
	for i := len(g.cleanups) - 1; i >= 0; i-- {
		g.cleanups[i]()
	}
	g.cleanups = nil
	if err := os.RemoveAll(g.dir); err != nil {
		return fmt.Errorf("remove the Git server's directory: %w", err)
	}
	return nil
}

// serveRepo starts the phase's Git server with an empty repository.
func (v *variablesRun) serveRepo() (err error) {
	v.git, v.repo, err = serveGitRepo(v.log, variablesRepo)
	return err
}

// serveGitRepo starts a Git server with one empty repository; closing the host stops it.
func serveGitRepo(log io.Writer, name string) (*gitHost, *gitserver.Repo, error) {
	host, err := newGitHost(log)
	if err != nil {
		return nil, nil, err
	}
	var repo *gitserver.Repo
	err = host.try(func() {
		repo = gitserver.New(host).Repo(host, name)
	})
	if err != nil {
		return host, nil, fmt.Errorf("serve the Git repository: %w", err)
	}
	return host, repo, nil
}

// commit commits the bundle of revision k on the sync's branch and returns the commit.
func (v *variablesRun) commit(k int) (string, error) {
	return commitFiles(v.git, v.repo, variablesBranch, map[string]string{"deploy/settings.yaml": variablesBundle(v.Objects, k)}, k)
}

// commitFiles commits revision k's files on branch and returns the commit.
func commitFiles(host *gitHost, repo *gitserver.Repo, branch string, files map[string]string, k int) (string, error) {
	if repo == nil {
		return "", errors.New("no Git repository served")
	}
	var commit string
	err := host.try(func() {
		commit = repo.Commit(host, branch, files, fmt.Sprintf("revision %d", k))
	})
	if err != nil {
		return "", fmt.Errorf("commit revision %d: %w", k, err)
	}
	return commit, nil
}

// variablesBundle is revision k's bundle: n ConfigMaps, each naming the cluster's ring
// label and the sync's region, which clusters of one ring share, and the revision, so
// that each revision's bundle differs from the one before.
func variablesBundle(n, k int) string {
	docs := make([]string, 0, n)
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-%d\ndata:\n  ring: ${cluster.labels.ring}\n  region: ${region}\n  revision: \"%d\"\n", i, k))
	}
	return strings.Join(docs, "---\n")
}
