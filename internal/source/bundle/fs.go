package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// errReadOnly refuses writes: a build has no business changing the source.
var errReadOnly = errors.New("the source is read-only to kustomize")

// confinedFS is the disk as kustomize sees it: only below root, read-only,
// and with every file read counted against the budget. It backs up the
// checks made before the build, should kustomize load a path by some route
// they did not foresee.
type confinedFS struct {
	filesys.FileSystem
	root   string
	budget *budget
	// counted holds the files already charged to the budget.
	counted map[string]bool
	// err is the first breach of the root or the limits; kustomize may wrap
	// or reword a read error, so Build reports this one instead.
	err error
}

var _ filesys.FileSystem = (*confinedFS)(nil)

// inside resolves p and tells whether it lies below the root. A path that
// does not exist yet is judged by its cleaned form.
func (f *confinedFS) inside(p string) bool {
	abs, err := filepath.Abs(p)
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return within(f.root, abs)
}

// refuse records and returns the error for p lying outside the root.
func (f *confinedFS) refuse(p string) error {
	rel, err := filepath.Rel(f.root, p)
	if err != nil {
		rel = p
	}
	err = &PathError{Path: filepath.ToSlash(rel), Reason: "is outside the source"}
	if f.err == nil {
		f.err = err
	}
	return err
}

func (f *confinedFS) ReadFile(p string) ([]byte, error) {
	if err := f.admit(p); err != nil {
		return nil, err
	}
	return f.FileSystem.ReadFile(p)
}

func (f *confinedFS) Open(p string) (filesys.File, error) {
	if err := f.admit(p); err != nil {
		return nil, err
	}
	return f.FileSystem.Open(p)
}

// admit checks that p may be read and counts it, once per file, before it
// is read, so an oversized file is never loaded. Kustomize also "reads"
// directories to tell them from files; those cost nothing.
func (f *confinedFS) admit(p string) error {
	if !f.inside(p) {
		return f.refuse(p)
	}
	info, err := os.Stat(p)
	if err != nil || info.IsDir() {
		return nil // the read itself reports it
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if f.counted[abs] {
		return nil
	}
	if f.counted == nil {
		f.counted = map[string]bool{}
	}
	f.counted[abs] = true
	if err := f.budget.read(info.Size()); err != nil {
		if f.err == nil {
			f.err = err
		}
		return err
	}
	return nil
}

func (f *confinedFS) IsDir(p string) bool { return f.inside(p) && f.FileSystem.IsDir(p) }

func (f *confinedFS) Exists(p string) bool { return f.inside(p) && f.FileSystem.Exists(p) }

func (f *confinedFS) ReadDir(p string) ([]string, error) {
	if !f.inside(p) {
		return nil, f.refuse(p)
	}
	return f.FileSystem.ReadDir(p)
}

func (f *confinedFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	dir, file, err := f.FileSystem.CleanedAbs(p)
	if err != nil {
		return dir, file, err
	}
	if !f.inside(dir.Join(file)) {
		return "", "", f.refuse(dir.Join(file))
	}
	return dir, file, nil
}

func (f *confinedFS) Glob(pattern string) ([]string, error) {
	matches, err := f.FileSystem.Glob(pattern)
	if err != nil {
		return nil, err
	}
	kept := matches[:0]
	for _, m := range matches {
		if f.inside(m) {
			kept = append(kept, m)
		}
	}
	return kept, nil
}

func (f *confinedFS) Walk(p string, walkFn filepath.WalkFunc) error {
	if !f.inside(p) {
		return f.refuse(p)
	}
	return f.FileSystem.Walk(p, walkFn)
}

func (f *confinedFS) Create(string) (filesys.File, error) { return nil, errReadOnly }

func (f *confinedFS) Mkdir(string) error { return errReadOnly }

func (f *confinedFS) MkdirAll(string) error { return errReadOnly }

func (f *confinedFS) RemoveAll(string) error { return errReadOnly }

func (f *confinedFS) WriteFile(string, []byte) error { return errReadOnly }
