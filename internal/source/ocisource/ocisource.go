// Package ocisource fetches manifests from OCI artifacts, as `flux push artifact` writes
// them: it resolves a tag, a semver range or a digest to a manifest digest without
// downloading content, and pulls an artifact's single tar+gzip layer into a bounded
// on-disk cache, once per artifact however many callers ask for it.
package ocisource

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/vidra-operator/vidra/internal/source/dircache"
)

// Remote is where an artifact lives and how to reach it.
type Remote struct {
	// URL is oci://host[:port]/repository, with no tag or digest.
	URL string
	// Username and Password, when either is set, authenticate with HTTP basic auth (a
	// registry's token exchange included); otherwise requests are anonymous.
	Username, Password string
	// CA is PEM certificates trusted in addition to the system's roots.
	CA []byte
	// InsecureHTTP allows plain http to the registry; without it, http is refused.
	InsecureHTTP bool
}

// Fingerprint tells apart the ways callers reach the registry (credentials, trusted CA),
// for caches of what was pulled or built from it: see dircache.Fingerprint.
func (r Remote) Fingerprint() string {
	return dircache.Fingerprint([]byte(r.Username), []byte(r.Password), r.CA)
}

// Ref selects an artifact in a repository: at most one field is set; none means the tag
// "latest".
type Ref struct {
	Tag string
	// SemVer is a version constraint (e.g. ">=1.2.0 <2.0.0") matched against the
	// repository's tags that are semantic versions, with or without a "v" prefix.
	SemVer string
	// Digest is a manifest digest, sha256:<64 hex>.
	Digest string
}

// Revision is a resolved artifact: its manifest digest, and the tag it was found under.
type Revision struct {
	// Tag is empty when the artifact was selected by digest.
	Tag string
	// Digest is the manifest digest, sha256:<64 hex>.
	Digest string
}

// String is "<tag>@sha256:<hex>", or "sha256:<hex>" when there is no tag.
func (r Revision) String() string {
	if r.Tag == "" {
		return r.Digest
	}
	return r.Tag + "@" + r.Digest
}

// Limits bound what one artifact may cost; a field that is zero or less takes its
// default.
type Limits struct {
	// MaxArtifactBytes bounds the compressed layer (default 64 MiB).
	MaxArtifactBytes int64
	// MaxBytes bounds the total size of the extracted files (default 256 MiB).
	MaxBytes int64
	// MaxFiles bounds the number of entries extracted, directories included (default
	// 10000).
	MaxFiles int
}

const (
	defaultMaxArtifactBytes = 64 << 20
	defaultMaxBytes         = 256 << 20
	defaultMaxFiles         = 10000
)

func (l Limits) withDefaults() Limits {
	if l.MaxArtifactBytes <= 0 {
		l.MaxArtifactBytes = defaultMaxArtifactBytes
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = defaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = defaultMaxFiles
	}
	return l
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func validateDigest(digest string) error {
	if !digestPattern.MatchString(digest) {
		return &InvalidError{Msg: fmt.Sprintf("digest %q is not sha256:<64 lowercase hex>", digest)}
	}
	return nil
}

func (r Ref) validate() error {
	set := 0
	for _, f := range []string{r.Tag, r.SemVer, r.Digest} {
		if strings.TrimSpace(f) != "" {
			set++
		}
	}
	if set > 1 {
		return &InvalidError{Msg: "a reference sets at most one of tag, semver and digest"}
	}
	if r.Digest != "" {
		return validateDigest(r.Digest)
	}
	return nil
}
