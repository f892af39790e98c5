package gitsource

import (
	"context"
	"fmt"

	fluxgit "github.com/fluxcd/pkg/git"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// isOtherRef tells a full ref name outside refs/heads and refs/tags: a pull request's
// head (refs/pull/1/head), a merge request's (refs/merge-requests/1/head).
func isOtherRef(name string) bool {
	ref := plumbing.ReferenceName(name)
	return name != "" && !ref.IsBranch() && !ref.IsTag()
}

// fetchRef checks out into dir the commit the ref name points at, one commit deep, and
// returns it. Flux's client clones branches and then looks for the commit, which a pull
// request from a fork is on none of: its commit is reachable from refs/pull/N/head
// alone, so that ref is fetched by name, as `git fetch origin refs/pull/1/head` would.
func fetchRef(ctx context.Context, e *endpoint, name, dir string) (string, error) {
	auth, err := e.transportAuth()
	if err != nil {
		return "", err
	}
	repo, err := gogit.PlainInit(dir, false)
	if err != nil {
		return "", fmt.Errorf("fetch %s of %s: %w", name, e.display, err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: fluxgit.DefaultRemote, URLs: []string{e.remote.URL}}); err != nil {
		return "", fmt.Errorf("fetch %s of %s: %w", name, e.display, err)
	}
	err = repo.FetchContext(ctx, &gogit.FetchOptions{
		RemoteName: fluxgit.DefaultRemote,
		RefSpecs:   []config.RefSpec{config.RefSpec("+" + name + ":" + name)},
		Depth:      1,
		Auth:       auth,
		Tags:       gogit.NoTags,
	})
	if err != nil {
		return "", err
	}
	ref, err := repo.Reference(plumbing.ReferenceName(name), true)
	if err != nil {
		return "", fmt.Errorf("fetch %s of %s: %w", name, e.display, err)
	}
	tree, err := repo.Worktree()
	if err != nil {
		return "", fmt.Errorf("check out %s of %s: %w", name, e.display, err)
	}
	if err := tree.Checkout(&gogit.CheckoutOptions{Hash: ref.Hash(), Force: true}); err != nil {
		return "", fmt.Errorf("check out %s of %s: %w", name, e.display, err)
	}
	return ref.Hash().String(), nil
}
