// Package gitsource resolves Git refs to commits and keeps checkouts of
// those commits on disk, fetching each one once however many syncs ask.
//
// Resolve only lists the remote's refs (no objects are downloaded), so
// polling a branch is cheap; Checkout clones a resolved Revision into a
// bounded on-disk cache.
package gitsource

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/vidra-operator/vidra/internal/source/dircache"
)

// Auth is how the remote is reached, as read from a Secret: a username and
// password, or a bearer token, for https://; an identity (private key, with
// Password as its passphrase if it is encrypted) and known_hosts for ssh://.
type Auth struct {
	Username, Password, BearerToken string
	Identity, KnownHosts            []byte
}

// Remote is a repository and how to reach it.
type Remote struct {
	URL  string
	Auth Auth
	// CA holds extra trusted CA certificates, PEM encoded, for https://.
	CA []byte
	// InsecureHTTP allows http:// URLs, credentials included.
	InsecureHTTP bool
}

// Fingerprint tells apart the ways callers reach the remote (credentials, trusted CA),
// for caches of what was fetched or built from it: see dircache.Fingerprint.
func (r Remote) Fingerprint() string {
	a := r.Auth
	return dircache.Fingerprint([]byte(a.Username), []byte(a.Password), []byte(a.BearerToken), a.Identity, a.KnownHosts, r.CA)
}

// Ref names what to check out. At most one field is set; none means the
// remote's HEAD, its default branch.
type Ref struct {
	Branch, Tag, SemVer, Commit string
	// Name is a full reference name, as Flux's spec.ref.name: "refs/pull/1/head",
	// "refs/heads/preview/x".
	Name string
}

// Revision is what a Ref named when it was resolved.
type Revision struct {
	// Ref is the human name, a branch or tag ("main", "v1.2.0"); "" when a
	// commit was asked for.
	Ref string
	// Commit is the 40-hex SHA-1 of the commit.
	Commit string
}

// String renders the revision as Flux does: "main@sha1:<hex>", or
// "sha1:<hex>" for a commit ref.
func (r Revision) String() string {
	if r.Ref == "" {
		return "sha1:" + r.Commit
	}
	return r.Ref + "@sha1:" + r.Commit
}

// validate refuses refs that name more than one thing or that no Git
// server could hold.
func (r Ref) validate() error {
	set := 0
	for _, v := range []string{r.Branch, r.Tag, r.SemVer, r.Commit, r.Name} {
		if v != "" {
			set++
		}
	}
	if set > 1 {
		return &InvalidError{Reason: "a ref sets at most one of branch, tag, semver, commit and name"}
	}
	if r.Name != "" && (!strings.HasPrefix(r.Name, "refs/") || plumbing.ReferenceName(r.Name).Validate() != nil) {
		return &InvalidError{Reason: fmt.Sprintf("ref name %q is not a full Git reference name, such as refs/pull/1/head", r.Name)}
	}
	if r.Branch != "" && plumbing.NewBranchReferenceName(r.Branch).Validate() != nil {
		return &InvalidError{Reason: fmt.Sprintf("branch %q is not a valid Git branch name", r.Branch)}
	}
	if r.Tag != "" && plumbing.NewTagReferenceName(r.Tag).Validate() != nil {
		return &InvalidError{Reason: fmt.Sprintf("tag %q is not a valid Git tag name", r.Tag)}
	}
	return nil
}

// parseCommit returns c lower-cased if it is a full 40-hex SHA-1.
func parseCommit(c string) (string, error) {
	c = strings.ToLower(c)
	if len(c) != 40 || strings.Trim(c, "0123456789abcdef") != "" {
		return "", &InvalidError{Reason: fmt.Sprintf("commit %q is not a full 40-hex SHA-1", c)}
	}
	return c, nil
}
