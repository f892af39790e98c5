package ocisource

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// InvalidError is a source that cannot work as configured (a malformed URL or reference,
// plain http without InsecureHTTP, an unusable CA): retrying will not help.
type InvalidError struct {
	Msg string
	// PlainHTTP: the registry speaks plain http, which InsecureHTTP would allow.
	PlainHTTP bool
}

func (e *InvalidError) Error() string { return e.Msg }

// NotFoundError is a repository, tag or digest the registry does not have, or a semver
// range no tag matches.
type NotFoundError struct {
	// What is missing, e.g. `tag "v1"` or `a tag matching semver ">=2"`.
	What string
	// Where is the oci:// URL looked in.
	Where string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s: %s not found", e.Where, e.What)
}

// InvalidArtifactError is an artifact this package cannot deliver: not a single tar+gzip
// layer, or an archive with an entry that is unsafe to extract.
type InvalidArtifactError struct {
	// Artifact is oci://host/repository@sha256:….
	Artifact string
	Reason   string
	// Err is what reading the layer met, when that is the cause.
	Err error
}

func (e *InvalidArtifactError) Error() string {
	return e.Artifact + ": " + e.Reason
}

func (e *InvalidArtifactError) Unwrap() error { return e.Err }

// LimitError is an artifact larger than one of the cache's Limits.
type LimitError struct {
	Artifact string
	// Limit names the bound: MaxArtifactBytes, MaxBytes, MaxFiles, MaxTagListBytes or
	// MaxTagListPages.
	Limit string
	Max   int64
	// Seen is the figure that went over: the layer's declared size, or what was counted
	// when extraction stopped.
	Seen int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s=%d exceeded (%d %s)", e.Artifact, e.Limit, e.Max, e.Seen, e.unit())
}

func (e *LimitError) unit() string {
	switch e.Limit {
	case "MaxFiles":
		return "entries"
	case limitTagPages:
		return "pages"
	}
	return "bytes"
}

// StatusError is a registry's answer other than success: its HTTP status alone. The
// messages of its body are the registry's words, which must not reach a sync's status or
// Events; the code says what went wrong.
type StatusError struct {
	StatusCode int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the registry answered HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// IsAuthError reports whether the registry refused the credentials (or their absence):
// HTTP 401 or 403.
func IsAuthError(err error) bool {
	code := 0
	var terr *transport.Error
	var serr *StatusError
	switch {
	case errors.As(err, &serr):
		code = serr.StatusCode
	case errors.As(err, &terr):
		code = terr.StatusCode
	}
	return code == http.StatusUnauthorized || code == http.StatusForbidden
}

// isNotFound reports a 404, and whether the registry said it was the repository that is
// missing (rather than the manifest).
func isNotFound(err error) (notFound, repository bool) {
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != http.StatusNotFound {
		return false, false
	}
	for _, d := range terr.Errors {
		if d.Code == transport.NameUnknownErrorCode {
			return true, true
		}
	}
	return true, false
}

// classify turns what the registry client returned into this package's errors where one
// fits, and otherwise wraps it with context (a transient failure to retry).
func classify(err error, where, what string) error {
	var plain *plainHTTPError
	if errors.As(err, &plain) || errors.Is(err, http.ErrSchemeMismatch) {
		return &InvalidError{Msg: fmt.Sprintf("%s: the registry answers on plain http, which would carry credentials and content in clear", where), PlainHTTP: true}
	}
	if notFound, repository := isNotFound(err); notFound {
		if repository {
			what = "repository"
		}
		return &NotFoundError{What: what, Where: where}
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		err = &StatusError{StatusCode: terr.StatusCode}
	}
	return fmt.Errorf("%s: %s: %w", where, what, err)
}
