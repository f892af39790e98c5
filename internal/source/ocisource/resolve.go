package ocisource

import (
	"context"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/vidra-operator/vidra/internal/source/tags"
)

const defaultTag = "latest"

// Resolve finds the manifest digest ref selects in src's repository, without
// downloading any content: a tag costs a HEAD of its manifest, a semver range a listing
// of the tags first, a digest a HEAD of its manifest: the registry is always asked, with
// src's own credentials, so that no caller reads, through the cache, an artifact its
// credentials do not open.
func (c *Cache) Resolve(ctx context.Context, src Remote, ref Ref) (Revision, error) {
	if err := ref.validate(); err != nil {
		return Revision{}, err
	}
	t, err := newTarget(src)
	if err != nil {
		return Revision{}, err
	}
	defer t.close()

	tag := ref.Tag
	switch {
	case ref.Digest != "":
		if err := t.digestExists(ctx, ref.Digest); err != nil {
			return Revision{}, err
		}
		return Revision{Digest: ref.Digest}, nil
	case ref.SemVer != "":
		if tag, err = t.latestMatching(ctx, ref.SemVer); err != nil {
			return Revision{}, err
		}
	case tag == "":
		tag = defaultTag
	}
	digest, err := t.tagDigest(ctx, tag)
	if err != nil {
		return Revision{}, err
	}
	return Revision{Tag: tag, Digest: digest}, nil
}

// tagDigest is the digest of the manifest tag points to.
func (t *target) tagDigest(ctx context.Context, tag string) (string, error) {
	what := fmt.Sprintf("tag %q", tag)
	ref, err := name.NewTag(t.repo.Name()+":"+tag, t.nameOpts...)
	if err != nil {
		return "", &InvalidError{Msg: fmt.Sprintf("%s: %s is not a valid tag: %v", t.url, what, err)}
	}
	desc, err := remote.Head(ref, t.options(ctx)...)
	if err == nil {
		return checkedDigest(desc.Digest.String(), t.url, what)
	}
	if !needsGet(err) {
		return "", classify(err, t.url, what)
	}
	// A HEAD answer has no body to tell a missing tag from a missing repository, and
	// some registries leave out the digest header: a GET of the (small) manifest says.
	got, err := remote.Get(ref, t.options(ctx)...)
	if err != nil {
		return "", classify(err, t.url, what)
	}
	return checkedDigest(got.Digest.String(), t.url, what)
}

// digestExists asks the registry for the manifest digest names.
func (t *target) digestExists(ctx context.Context, digest string) error {
	what := fmt.Sprintf("digest %s", digest)
	ref, err := name.NewDigest(t.repo.Name()+"@"+digest, t.nameOpts...)
	if err != nil {
		return &InvalidError{Msg: fmt.Sprintf("%s: %s is not a valid digest: %v", t.url, what, err)}
	}
	if _, err := remote.Head(ref, t.options(ctx)...); err != nil {
		return classify(err, t.url, what)
	}
	return nil
}

func needsGet(headErr error) bool {
	notFound, _ := isNotFound(headErr)
	return notFound || strings.Contains(headErr.Error(), "Docker-Content-Digest")
}

// checkedDigest keeps Revision's promise of a sha256 digest.
func checkedDigest(digest, where, what string) (string, error) {
	if !digestPattern.MatchString(digest) {
		return "", &InvalidError{Msg: fmt.Sprintf("%s: %s: the registry answered digest %q; only sha256 is supported", where, what, digest)}
	}
	return digest, nil
}

// latestMatching is the tag with the highest semantic version within constraint, as
// tags.Newest chooses it.
func (t *target) latestMatching(ctx context.Context, constraint string) (string, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", &InvalidError{Msg: fmt.Sprintf("semver %q is not a valid constraint: %v", constraint, err)}
	}
	best := ""
	listed, err := t.listTags(ctx, func(page []string) {
		if best != "" {
			page = append(page, best)
		}
		if newest, ok := tags.Newest(page, c); ok {
			best = newest
		}
	})
	if err != nil {
		return "", err
	}
	if best == "" {
		return "", &NotFoundError{What: fmt.Sprintf("a tag matching semver %q (tags seen: %d)", constraint, listed), Where: t.url}
	}
	return best, nil
}
