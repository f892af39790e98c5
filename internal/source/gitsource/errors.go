package gitsource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/vidra-operator/vidra/internal/runtime/bytesize"
)

// InvalidError reports input that cannot work as written (a bad URL, http://
// without InsecureHTTP, a malformed commit or semver range): retrying will
// not help, the spec or Secret must change.
type InvalidError struct {
	Reason string
	// PlainHTTP: the URL is http://, which InsecureHTTP would allow.
	PlainHTTP bool
}

func (e *InvalidError) Error() string { return e.Reason }

// AuthError reports that the remote refused the credentials (HTTP 401 or
// 403, or an SSH authentication or host key failure).
type AuthError struct {
	URL string
	Err error
}

func (e *AuthError) Error() string {
	// go-git ends its message with ": " and the refusal's body, which is never read.
	return fmt.Sprintf("authenticate to %s: %s", e.URL, strings.TrimSuffix(strings.TrimSpace(e.Err.Error()), ":"))
}

func (e *AuthError) Unwrap() error { return e.Err }

// RefNotFoundError reports that the repository, or the ref asked for in it,
// does not exist.
type RefNotFoundError struct {
	URL string
	// Kind is "repository", "default branch", "branch", "tag", "branch or
	// tag", "semver" or "commit".
	Kind string
	// Name is the branch, tag, constraint or commit asked for.
	Name string
}

func (e *RefNotFoundError) Error() string {
	switch e.Kind {
	case "repository":
		return fmt.Sprintf("repository %s not found", e.URL)
	case "default branch":
		return fmt.Sprintf("repository %s has no default branch (HEAD); is it empty?", e.URL)
	case "semver":
		return fmt.Sprintf("no tag matching semver %q in %s", e.Name, e.URL)
	case "commit":
		return fmt.Sprintf("commit sha1:%s not found in %s", e.Name, e.URL)
	}
	return fmt.Sprintf("%s %q not found in %s", e.Kind, e.Name, e.URL)
}

// MovedError reports that a branch or tag no longer points at the commit it
// was resolved to. Checkout never returns another tree than the one asked
// for; resolving again picks up the new commit.
type MovedError struct {
	URL  string
	Ref  string
	Want string // the commit asked for
	Now  string // the commit the ref points at now
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("%q in %s moved from sha1:%s to sha1:%s since it was resolved; resolve it again",
		e.Ref, e.URL, e.Want, e.Now)
}

// LimitError reports a checkout that outgrew a bound; it has been deleted.
type LimitError struct {
	URL    string
	Commit string
	// Bound is "bytes" (Limits.MaxRepoBytes), "files" (Limits.MaxFiles) or
	// "response" (what the remote sent over HTTP: Limits.MaxRefsBytes for a ref
	// advertisement, MaxRepoBytes for a clone's pack).
	Bound  string
	Limit  int64
	Actual int64
	// AtLeast says Actual was measured while cloning, so the checkout
	// would have grown further.
	AtLeast bool
}

func (e *LimitError) Error() string {
	atLeast := ""
	if e.AtLeast {
		atLeast = "at least "
	}
	switch e.Bound {
	case "response":
		if e.Commit == "" {
			return fmt.Sprintf("repository %s answered a ref listing with more than %s, the bound of a ref advertisement",
				e.URL, bytesize.Format(e.Limit))
		}
		return fmt.Sprintf("repository %s at sha1:%s sent more than %s in one answer while cloning, over the bound of a ref advertisement or of a pack (--git-max-repo-bytes)",
			e.URL, e.Commit, bytesize.Format(e.Limit))
	case "files":
		return fmt.Sprintf("repository %s at sha1:%s has %s%d files on disk, over the %d limit (--git-max-files)",
			e.URL, e.Commit, atLeast, e.Actual, e.Limit)
	}
	return fmt.Sprintf("repository %s at sha1:%s is %s%s on disk, over the %s limit (--git-max-repo-bytes)",
		e.URL, e.Commit, atLeast, bytesize.Format(e.Actual), bytesize.Format(e.Limit))
}

// IsAuthError tells whether err means the credentials were refused.
func IsAuthError(err error) bool {
	var a *AuthError
	return errors.As(err, &a)
}

// IsNotFound tells whether err means the repository or ref does not exist.
func IsNotFound(err error) bool {
	var n *RefNotFoundError
	return errors.As(err, &n)
}

// IsInvalid tells whether err means the input cannot work as written.
func IsInvalid(err error) bool {
	var i *InvalidError
	return errors.As(err, &i)
}

// classify turns a go-git or Flux error from talking to url into one of
// this package's errors, or wraps it with what was being done.
func classify(err error, url, doing string) error {
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return &AuthError{URL: url, Err: err}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return &RefNotFoundError{URL: url, Kind: "repository"}
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return &RefNotFoundError{URL: url, Kind: "default branch"}
	}
	// x/crypto/ssh reports these only as text.
	msg := err.Error()
	if strings.Contains(msg, "ssh: unable to authenticate") || strings.Contains(msg, "knownhosts:") {
		return &AuthError{URL: url, Err: err}
	}
	return fmt.Errorf("%s %s: %w", doing, url, err)
}

// scrub replaces any credential that found its way into err's message.
// Nothing here puts one there; this guards what libraries might echo.
func scrub(err error, auth Auth) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, secret := range []string{auth.Password, auth.BearerToken} {
		// Shorter ones would match ordinary words; nothing echoes them.
		if len(secret) >= 4 {
			clean = strings.ReplaceAll(clean, secret, "[redacted]")
		}
	}
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

// scrubbed keeps the error chain for errors.Is/As while showing a cleaned
// message.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
