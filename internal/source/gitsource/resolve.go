package gitsource

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/vidra-operator/vidra/internal/source/tags"
)

// Resolve tells which commit ref names on the remote now. It lists the
// remote's refs only and downloads no objects. A Commit ref names its
// commit already, but the remote is still asked for its refs: that checks
// the caller's access, so no caller reads, through the cache, a repository
// its credentials do not open.
func (c *Cache) Resolve(ctx context.Context, remote Remote, ref Ref) (Revision, error) {
	rev, err := c.resolve(ctx, remote, ref)
	return rev, scrub(err, remote.Auth)
}

func (c *Cache) resolve(ctx context.Context, remote Remote, ref Ref) (Revision, error) {
	if err := ref.validate(); err != nil {
		return Revision{}, err
	}
	e, err := parseRemote(remote)
	if err != nil {
		return Revision{}, err
	}
	if ref.Commit != "" {
		commit, err := parseCommit(ref.Commit)
		if err != nil {
			return Revision{}, err
		}
		if _, err := e.listRefs(ctx, c.limits.MaxRefsBytes); err != nil {
			return Revision{}, err
		}
		return Revision{Commit: commit}, nil
	}
	var constraint *semver.Constraints
	if ref.SemVer != "" {
		if constraint, err = semver.NewConstraint(ref.SemVer); err != nil {
			return Revision{}, &InvalidError{Reason: fmt.Sprintf("semver range %q does not parse: %v", ref.SemVer, err)}
		}
	}
	listed, err := e.listRefs(ctx, c.limits.MaxRefsBytes)
	if err != nil {
		return Revision{}, err
	}
	switch {
	case ref.Name != "":
		if h, ok := listed.named(ref.Name); ok {
			return Revision{Ref: ref.Name, Commit: h}, nil
		}
		return Revision{}, &RefNotFoundError{URL: e.display, Kind: "ref", Name: ref.Name}
	case ref.Branch != "":
		if h, ok := listed.hashes[plumbing.NewBranchReferenceName(ref.Branch).String()]; ok {
			return Revision{Ref: ref.Branch, Commit: h}, nil
		}
		return Revision{}, &RefNotFoundError{URL: e.display, Kind: "branch", Name: ref.Branch}
	case ref.Tag != "":
		if h, ok := listed.tag(ref.Tag); ok {
			return Revision{Ref: ref.Tag, Commit: h}, nil
		}
		return Revision{}, &RefNotFoundError{URL: e.display, Kind: "tag", Name: ref.Tag}
	case constraint != nil:
		tag, ok := newestMatch(listed, constraint)
		if !ok {
			return Revision{}, &RefNotFoundError{URL: e.display, Kind: "semver", Name: ref.SemVer}
		}
		h, _ := listed.tag(tag)
		return Revision{Ref: tag, Commit: h}, nil
	}
	branch := plumbing.ReferenceName(listed.head)
	h, ok := listed.hashes[listed.head]
	if !branch.IsBranch() || !ok {
		return Revision{}, &RefNotFoundError{URL: e.display, Kind: "default branch"}
	}
	return Revision{Ref: branch.Short(), Commit: h}, nil
}

// newestMatch returns the newest tag constraint accepts (see tags.Newest).
func newestMatch(listed refs, constraint *semver.Constraints) (string, bool) {
	var names []string
	for name := range listed.hashes {
		if tag, ok := strings.CutPrefix(name, "refs/tags/"); ok && !strings.HasSuffix(tag, "^{}") {
			names = append(names, tag)
		}
	}
	return tags.Newest(names, constraint)
}

// ListRefs lists the remote's refs whose full names match one of patterns (path.Match
// globs, where * stops at a slash: refs/pull/*/head), each with its commit. It downloads
// no objects.
func (c *Cache) ListRefs(ctx context.Context, remote Remote, patterns []string) (map[string]string, error) {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, &InvalidError{Reason: fmt.Sprintf("ref pattern %q is not a glob: %v", p, err)}
		}
	}
	e, err := parseRemote(remote)
	if err != nil {
		return nil, err
	}
	listed, err := e.listRefs(ctx, c.limits.MaxRefsBytes)
	if err != nil {
		return nil, scrub(err, remote.Auth)
	}
	out := map[string]string{}
	for name := range listed.hashes {
		if strings.HasSuffix(name, "^{}") {
			continue
		}
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				out[name], _ = listed.named(name)
				break
			}
		}
	}
	return out, nil
}
