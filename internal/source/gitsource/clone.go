package gitsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/git/gogit"
	"github.com/fluxcd/pkg/git/repository"
	"github.com/go-git/go-git/v5/plumbing"
)

// limitPoll is how often a clone in progress is measured against the
// limits, so a huge repository is stopped long before it fills the disk.
const limitPoll = 200 * time.Millisecond

// clone fetches rev into dir with Flux's go-git client, on disk storage so
// memory stays bounded whatever the repository's size.
func (c *Cache) clone(ctx context.Context, e *endpoint, rev Revision, dir string) error {
	strategy, shallow, err := c.strategy(ctx, e, rev)
	if err != nil {
		return err
	}
	x, err := newExchange(e.remote.CA, c.limits.MaxRefsBytes, c.limits.MaxRepoBytes)
	if err != nil {
		return err
	}
	defer x.close()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := c.watch(ctx, cancel, e, rev.Commit, dir)
	var got string
	if isOtherRef(strategy.RefName) {
		got, err = fetchRef(x.within(ctx), e, strategy.RefName, dir)
	} else {
		got, err = cloneWithFlux(x.within(ctx), e, dir, repository.CloneConfig{CheckoutStrategy: strategy, ShallowClone: shallow})
	}
	stop()
	if over := x.over(); over != nil {
		return &LimitError{URL: e.display, Commit: rev.Commit, Bound: "response", Limit: over.Max()}
	}
	if err != nil {
		var limit *LimitError
		if errors.As(context.Cause(ctx), &limit) {
			return limit
		}
		if errors.Is(err, plumbing.ErrObjectNotFound) && strategy.Commit != "" {
			return &RefNotFoundError{URL: e.display, Kind: "commit", Name: rev.Commit}
		}
		return classify(err, e.display, "clone")
	}
	if got == "" {
		return &RefNotFoundError{URL: e.display, Kind: "default branch"}
	}
	if got != rev.Commit {
		ref := cmp.Or(rev.Ref, strategy.Branch, strategy.Tag)
		return &MovedError{URL: e.display, Ref: ref, Want: rev.Commit, Now: got}
	}
	return c.checkLimits(e, rev.Commit, dir, false)
}

// cloneWithFlux clones into dir with Flux's go-git client, on disk storage so memory
// stays bounded whatever the repository's size, and returns the commit checked out ("" when
// the remote has no default branch).
func cloneWithFlux(ctx context.Context, e *endpoint, dir string, cfg repository.CloneConfig) (string, error) {
	authOpts, err := e.fluxAuth()
	if err != nil {
		return "", err
	}
	opts := []gogit.ClientOption{gogit.WithDiskStorage()}
	if e.remote.InsecureHTTP {
		opts = append(opts, gogit.WithInsecureCredentialsOverHTTP())
	}
	client, err := gogit.NewClient(dir, authOpts, opts...)
	if err != nil {
		return "", fmt.Errorf("clone %s: %w", e.display, err)
	}
	defer client.Close()
	got, err := client.Clone(ctx, e.remote.URL, cfg)
	if err != nil || got == nil {
		return "", err
	}
	return got.Hash.String(), nil
}

// strategy picks how to clone rev. A branch or tag tip at rev.Commit is
// cloned shallow, one commit deep; a commit that no ref points at needs
// the full history, then a checkout (as Flux does). The ref listing costs
// one advertisement, and tells a branch from a tag of the same name.
func (c *Cache) strategy(ctx context.Context, e *endpoint, rev Revision) (repository.CheckoutStrategy, bool, error) {
	listed, err := e.listRefs(ctx, c.limits.MaxRefsBytes)
	if err != nil {
		return repository.CheckoutStrategy{}, false, err
	}
	if strings.HasPrefix(rev.Ref, "refs/") {
		h, ok := listed.named(rev.Ref)
		switch {
		case !ok:
			return repository.CheckoutStrategy{}, false, &RefNotFoundError{URL: e.display, Kind: "ref", Name: rev.Ref}
		case h != rev.Commit:
			return repository.CheckoutStrategy{}, false, &MovedError{URL: e.display, Ref: rev.Ref, Want: rev.Commit, Now: h}
		}
		return repository.CheckoutStrategy{RefName: rev.Ref}, true, nil
	}
	branches := []string{rev.Ref}
	if rev.Ref == "" {
		branches = nil
		for name := range listed.hashes {
			if short, ok := branchName(name); ok {
				branches = append(branches, short)
			}
		}
	}
	for _, b := range branches {
		if listed.hashes[plumbing.NewBranchReferenceName(b).String()] == rev.Commit {
			return repository.CheckoutStrategy{Branch: b}, true, nil
		}
	}
	if rev.Ref != "" {
		if h, ok := listed.tag(rev.Ref); ok && h == rev.Commit {
			return repository.CheckoutStrategy{Tag: rev.Ref}, true, nil
		}
		if h, ok := listed.hashes[plumbing.NewBranchReferenceName(rev.Ref).String()]; ok {
			return repository.CheckoutStrategy{}, false, &MovedError{URL: e.display, Ref: rev.Ref, Want: rev.Commit, Now: h}
		}
		if h, ok := listed.tag(rev.Ref); ok {
			return repository.CheckoutStrategy{}, false, &MovedError{URL: e.display, Ref: rev.Ref, Want: rev.Commit, Now: h}
		}
		return repository.CheckoutStrategy{}, false, &RefNotFoundError{URL: e.display, Kind: "branch or tag", Name: rev.Ref}
	}
	return repository.CheckoutStrategy{Commit: rev.Commit}, false, nil
}

func branchName(full string) (string, bool) {
	ref := plumbing.ReferenceName(full)
	return ref.Short(), ref.IsBranch()
}

// watch measures dir against the limits while a clone runs and cancels it
// with a *LimitError as soon as it is over. The returned func stops it.
func (c *Cache) watch(ctx context.Context, cancel context.CancelCauseFunc, e *endpoint, commit, dir string) func() {
	if c.limits.MaxRepoBytes <= 0 && c.limits.MaxFiles <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(limitPoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := c.checkLimits(e, commit, dir, true); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// checkLimits measures dir. While a clone is still writing it (partial),
// files come and go under the walk, and it stops at the first figure over
// a bound.
func (c *Cache) checkLimits(e *endpoint, commit, dir string, partial bool) error {
	var bytes, files int64
	over := func() bool {
		return (c.limits.MaxRepoBytes > 0 && bytes > c.limits.MaxRepoBytes) ||
			(c.limits.MaxFiles > 0 && files > int64(c.limits.MaxFiles))
	}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if partial {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if partial {
				return nil
			}
			return err
		}
		bytes += info.Size()
		files++
		if partial && over() {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("measure checkout of %s: %w", e.display, err)
	}
	limit := &LimitError{URL: e.display, Commit: commit, AtLeast: partial}
	switch {
	case c.limits.MaxRepoBytes > 0 && bytes > c.limits.MaxRepoBytes:
		limit.Bound, limit.Limit, limit.Actual = "bytes", c.limits.MaxRepoBytes, bytes
	case c.limits.MaxFiles > 0 && files > int64(c.limits.MaxFiles):
		limit.Bound, limit.Limit, limit.Actual = "files", int64(c.limits.MaxFiles), files
	default:
		return nil
	}
	return limit
}
