package helmsource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
)

// NotFoundError is a repository, chart or version that is not there: no index.yaml,
// a chart the index does not list, a version or range nothing matches.
type NotFoundError struct {
	Msg string
	// Available is up to five of the newest versions of the chart, newest first, when
	// they are known.
	Available []string
	Err       error
}

func (e *NotFoundError) Error() string {
	if len(e.Available) == 0 {
		return e.Msg
	}
	return e.Msg + " (newest available: " + strings.Join(e.Available, ", ") + ")"
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// LimitError is an index, a chart or a rendering larger than one of the bounds.
type LimitError struct {
	// What is over the bound, e.g. "https://charts.example/index.yaml".
	What string
	// Limit names the bound: MaxIndexBytes, MaxChartBytes, MaxExpandedBytes (Limits),
	// MaxChartEntries, MaxChartNesting (fixed), MaxBundleBytes (RenderOptions.MaxBytes),
	// or one of ocisource.Limits.
	Limit string
	Max   int64
	Err   error
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case limitChartEntries:
		return fmt.Sprintf("%s has more files and directories than %s (%d)", e.What, e.Limit, e.Max)
	case limitChartNesting:
		return fmt.Sprintf("%s nests subchart archives deeper than %s (%d)", e.What, e.Limit, e.Max)
	}
	return fmt.Sprintf("%s is larger than %s (%d bytes)", e.What, e.Limit, e.Max)
}

func (e *LimitError) Unwrap() error { return e.Err }

// InvalidError is a source that cannot work as written, or content that is not what it
// should be: a malformed URL, http without InsecureHTTP, an index that does not parse,
// an archive that is not a chart or does not match its digest. Retrying will not help.
type InvalidError struct {
	Msg string
	Err error
}

func (e *InvalidError) Error() string { return e.Msg }

func (e *InvalidError) Unwrap() error { return e.Err }

// AuthError is a repository that refused the credentials, or their absence (HTTP 401
// or 403).
type AuthError struct {
	// URL is what was asked for, without credentials.
	URL        string
	StatusCode int
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("%s: access refused (HTTP %d): check the credentials", e.URL, e.StatusCode)
}

// IsAuthError reports whether err is a repository or registry refusing the credentials.
func IsAuthError(err error) bool {
	var auth *AuthError
	return errors.As(err, &auth) || ocisource.IsAuthError(err)
}

// fromOCI turns ocisource's errors into this package's, keeping the cause to unwrap (so
// IsAuthError still sees the registry's answer).
func fromOCI(err error) error {
	var (
		notFound *ocisource.NotFoundError
		limit    *ocisource.LimitError
		invalid  *ocisource.InvalidError
		artifact *ocisource.InvalidArtifactError
	)
	switch {
	case errors.As(err, &notFound):
		return &NotFoundError{Msg: notFound.Error(), Err: err}
	case errors.As(err, &limit):
		return &LimitError{What: limit.Artifact, Limit: limit.Limit, Max: limit.Max, Err: err}
	case errors.As(err, &invalid):
		msg := invalid.Msg
		if invalid.PlainHTTP {
			msg += "; set spec.source.insecureAllowHTTP to allow it"
		}
		return &InvalidError{Msg: msg, Err: err}
	case errors.As(err, &artifact):
		return &InvalidError{Msg: "not a Helm chart: " + artifact.Error(), Err: err}
	}
	return err
}
