// Package bundle turns a directory of a source (a Git checkout or an
// extracted artifact) into one multi-document YAML stream: the output of
// its kustomization if it has one, else its manifest files in path order.
//
// Nothing outside the source is read, fetched or run: paths and symlinks
// that leave it are refused, and so are remote kustomize bases and Helm
// charts.
package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Limits bound the files read for a bundle and its size; 0 is unbounded.
type Limits struct {
	// MaxFiles bounds the files read.
	MaxFiles int
	// MaxBytes bounds both the bytes read and the bundle.
	MaxBytes int64
}

// Build renders the directory path, relative to root ("" or "." for root
// itself), as multi-document YAML.
func Build(root, path string, limits Limits) ([]byte, error) {
	src, err := openSource(root, path)
	if err != nil {
		return nil, err
	}
	b := &budget{limits: limits, path: src.shown}
	var out []byte
	if k := kustomizationIn(src.dir); k != "" {
		out, err = buildKustomization(src, k, b)
	} else {
		out, err = buildPlain(src, b)
	}
	if err != nil {
		return nil, err
	}
	if err := b.output(len(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// source is a directory inside a source root, both with symlinks resolved.
type source struct {
	root, dir string
	// shown is the path as the user wrote it, for messages.
	shown string
}

// rel returns p relative to the root, with forward slashes, for messages.
func (s *source) rel(p string) string {
	r, err := filepath.Rel(s.root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

func openSource(root, path string) (*source, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("source root %s: %w", root, err)
	}
	realRoot, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("source root %s: %w", root, err)
	}
	shown := path
	if shown == "" {
		shown = "."
	}
	if filepath.IsAbs(path) || strings.HasPrefix(path, "/") {
		return nil, &PathError{Path: shown, Reason: "is absolute; give it relative to the source root"}
	}
	clean := filepath.Clean(filepath.FromSlash(shown))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return nil, &PathError{Path: shown, Reason: "is outside the source"}
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(realRoot, clean))
	if errors.Is(err, os.ErrNotExist) {
		return nil, &PathError{Path: shown, Reason: "does not exist in the source"}
	}
	if err != nil {
		return nil, fmt.Errorf("resolve path %q in the source: %w", shown, err)
	}
	if !within(realRoot, dir) {
		return nil, &PathError{Path: shown, Reason: "leads outside the source through a symlink"}
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("stat path %q in the source: %w", shown, err)
	}
	if !info.IsDir() {
		return nil, &PathError{Path: shown, Reason: "is not a directory"}
	}
	return &source{root: realRoot, dir: dir, shown: shown}, nil
}

// within tells whether p is root or below it; both must be clean.
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator)) ||
		root == string(filepath.Separator)
}

// budget counts what a build has read against the limits.
type budget struct {
	limits Limits
	path   string
	files  int64
	bytes  int64
}

// read accounts for one more file of size bytes.
func (b *budget) read(size int64) error {
	b.files++
	b.bytes += size
	if b.limits.MaxFiles > 0 && b.files > int64(b.limits.MaxFiles) {
		return &LimitError{Path: b.path, Bound: "files", Limit: int64(b.limits.MaxFiles), Actual: b.files}
	}
	if b.limits.MaxBytes > 0 && b.bytes > b.limits.MaxBytes {
		return &LimitError{Path: b.path, Bound: "bytes", Limit: b.limits.MaxBytes, Actual: b.bytes}
	}
	return nil
}

// output checks the bundle's own size.
func (b *budget) output(n int) error {
	if b.limits.MaxBytes > 0 && int64(n) > b.limits.MaxBytes {
		return &LimitError{Path: b.path, Bound: "bytes", Limit: b.limits.MaxBytes, Actual: int64(n)}
	}
	return nil
}
