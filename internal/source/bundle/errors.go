package bundle

import (
	"fmt"

	"github.com/vidra-operator/vidra/internal/runtime/bytesize"
)

// PathError reports a path that is not a directory inside the source.
type PathError struct {
	Path   string
	Reason string // "does not exist", "is outside the source", …
}

func (e *PathError) Error() string {
	return fmt.Sprintf("path %q %s", e.Path, e.Reason)
}

// KustomizeError reports a kustomization that does not build.
type KustomizeError struct {
	// Kustomization is the file's path relative to the source root.
	Kustomization string
	Err           error
}

func (e *KustomizeError) Error() string {
	return fmt.Sprintf("kustomize build %s: %v", e.Kustomization, e.Err)
}

func (e *KustomizeError) Unwrap() error { return e.Err }

// RemoteBaseError reports a kustomization that would fetch from outside the
// source: a remote base, resource, component or file, or a Helm chart.
type RemoteBaseError struct {
	Kustomization string
	// Field is the kustomization field ("resources", "helmCharts", …).
	Field string
	// Ref is the remote reference as written; "" for helmCharts.
	Ref string
}

func (e *RemoteBaseError) Error() string {
	const why = "Vidra builds only what the sync's source holds"
	if e.Ref == "" {
		return fmt.Sprintf("kustomization %s uses %s, which fetches charts: %s; render the chart into the repository",
			e.Kustomization, e.Field, why)
	}
	return fmt.Sprintf("kustomization %s refers to the remote base %q: %s; vendor it into the repository",
		e.Kustomization, e.Ref, why)
}

// LimitError reports a bundle whose inputs or output outgrew a bound.
type LimitError struct {
	Path string
	// Bound is "files" (Limits.MaxFiles) or "bytes" (Limits.MaxBytes).
	Bound  string
	Limit  int64
	Actual int64
}

func (e *LimitError) Error() string {
	if e.Bound == "files" {
		return fmt.Sprintf("path %q needs at least %d files, over the limit of %d files per bundle",
			e.Path, e.Actual, e.Limit)
	}
	return fmt.Sprintf("path %q needs at least %s of manifests, over the %s limit per bundle",
		e.Path, bytesize.Format(e.Actual), bytesize.Format(e.Limit))
}

// EmptyError reports a path that yields no objects.
type EmptyError struct {
	Path string
	// Kustomization is set when a kustomization built to nothing.
	Kustomization string
}

func (e *EmptyError) Error() string {
	if e.Kustomization != "" {
		return fmt.Sprintf("kustomization %s builds no objects", e.Kustomization)
	}
	return fmt.Sprintf("path %q holds no *.yaml, *.yml or *.json manifests", e.Path)
}
