package sourcesync

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/source/bundle"
	"github.com/vidra-operator/vidra/internal/source/gitsource"
)

// Keys of a GitSync's Secret.
const (
	usernameKey   = "username"
	passwordKey   = "password"
	bearerKey     = "bearerToken"
	identityKey   = "identity"
	knownHostsKey = "known_hosts"
)

// Git is the source of GitSyncs: a repository's revision, checked out once per URL and
// commit into Cache, and a path of it built into a bundle.
type Git struct {
	Secrets Secrets
	Cache   *gitsource.Cache
	// Build bounds the bundle built from a path.
	Build bundle.Limits
	// Timeout bounds one ls-remote or clone.
	Timeout time.Duration
}

// gitFetch is what Bundle needs of a resolved revision.
type gitFetch struct {
	remote gitsource.Remote
	rev    gitsource.Revision
	path   string
}

// Resolve asks the remote which commit the GitSync's ref names, with the sync's own
// credentials (for a commit ref too), so no sync reads, through the shared cache or the
// bundles built before, a repository its Secret does not open.
func (g *Git) Resolve(ctx context.Context, obj Object) (Revision, error) {
	gs := obj.(*vidrav1alpha1.GitSync)
	p, err := cleanPath(gs.Spec.Source.Path)
	if err != nil {
		return Revision{}, err
	}
	remote, err := g.remote(ctx, gs)
	if err != nil {
		return Revision{}, err
	}
	ctx, cancel := bounded(ctx, g.Timeout)
	defer cancel()
	rev, err := g.Cache.Resolve(ctx, remote, gitRef(gs.Spec.Source.Ref))
	if err != nil {
		return Revision{}, gitFailure(err)
	}
	return Revision{
		Name:        rev.String(),
		Key:         fmt.Sprintf("git\x00%s\x00%s\x00%s", remote.URL, rev.Commit, p),
		Credentials: remote.Fingerprint(),
		Fetch:       gitFetch{remote: remote, rev: rev, path: p},
	}, nil
}

// Bundle checks the commit out (once per URL and commit) and builds the path.
func (g *Git) Bundle(ctx context.Context, _ Object, rev Revision) ([]byte, error) {
	f := rev.Fetch.(gitFetch)
	ctx, cancel := bounded(ctx, g.Timeout)
	defer cancel()
	dir, release, err := g.Cache.Checkout(ctx, f.remote, f.rev)
	if err != nil {
		return nil, gitFailure(err)
	}
	defer release()
	data, err := bundle.Build(dir, f.path, g.Build)
	if err != nil {
		return nil, buildFailure(rev.Name, err)
	}
	return data, nil
}

// remote is the GitSync's repository with its credentials.
func (g *Git) remote(ctx context.Context, gs *vidrav1alpha1.GitSync) (gitsource.Remote, error) {
	src := gs.Spec.Source
	data, err := g.Secrets.data(ctx, gs, "spec.source.secretRef", src.SecretRef, src.URL)
	if err != nil {
		return gitsource.Remote{}, err
	}
	ca, err := g.Secrets.ca(ctx, gs, src.CASecretRef, src.URL)
	if err != nil {
		return gitsource.Remote{}, err
	}
	return gitsource.Remote{
		URL: src.URL,
		Auth: gitsource.Auth{
			Username: string(data[usernameKey]), Password: string(data[passwordKey]), BearerToken: string(data[bearerKey]),
			Identity: data[identityKey], KnownHosts: data[knownHostsKey],
		},
		CA:           ca,
		InsecureHTTP: src.InsecureAllowHTTP,
	}, nil
}

func gitRef(ref *vidrav1alpha1.GitRef) gitsource.Ref {
	if ref == nil {
		return gitsource.Ref{}
	}
	return gitsource.Ref{Branch: ref.Branch, Tag: ref.Tag, SemVer: ref.SemVer, Commit: ref.Commit, Name: ref.Name}
}

// cleanPath is a sync's path as one spelling ("" and "." and "./" are the root); a path
// that steps up ("..") is refused, not quietly kept inside.
func cleanPath(p string) (string, error) {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true,
				Err: fmt.Errorf("path %q steps out of the source with '..'; name a directory inside it", p)}
		}
	}
	return path.Clean("/" + p)[1:], nil
}

// gitFailure says what a Git error means for the sync.
func gitFailure(err error) error {
	var limit *gitsource.LimitError
	var moved *gitsource.MovedError
	var invalid *gitsource.InvalidError
	switch {
	case errors.As(err, &invalid) && invalid.PlainHTTP:
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: fmt.Errorf("%w, or set spec.source.insecureAllowHTTP: true", err)}
	case gitsource.IsInvalid(err):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: err}
	case gitsource.IsAuthError(err):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonAuthenticationFailed, Err: err}
	case gitsource.IsNotFound(err):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonRefNotFound, Err: err}
	case errors.As(err, &limit):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, Stalled: true, Err: err}
	case errors.As(err, &moved):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: err}
	}
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: err}
}

// buildFailure says what an error building a revision's path means for the sync: a new
// revision may mend it, so it is looked at again at the interval; a bound stalls.
func buildFailure(revision string, err error) error {
	var limit *bundle.LimitError
	if errors.As(err, &limit) {
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, Stalled: true, Err: fmt.Errorf("%s: %w", revision, err)}
	}
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("%s: %w", revision, err)}
}
