package ocisource

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// extractor writes a tar stream into dir, within the limits, refusing entries that could
// reach outside dir or that are not plain files, directories and links.
type extractor struct {
	dir      string
	artifact string
	limits   Limits

	bytes   int64 // file content written so far
	entries int
}

func (x *extractor) extract(r io.Reader) error {
	// os.Root confines every write to dir, whatever links earlier entries made.
	root, err := os.OpenRoot(x.dir)
	if err != nil {
		return fmt.Errorf("%s: %w", x.artifact, err)
	}
	defer func() { _ = root.Close() }()

	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, tar.ErrHeader) {
			return &InvalidArtifactError{Artifact: x.artifact, Reason: fmt.Sprintf("the layer is not a tar archive: %v", err)}
		}
		if err != nil {
			return corrupt(err, x.artifact, "read layer")
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // metadata for the archive, not an entry
		}
		if err := x.entry(root, tr, hdr); err != nil {
			return err
		}
	}
	return x.checkLinks(root)
}

func (x *extractor) entry(root *os.Root, tr *tar.Reader, hdr *tar.Header) error {
	name, err := entryPath(hdr.Name)
	if err != nil {
		return x.unsafe(hdr.Name, err.Error())
	}
	if name == "." {
		return nil // the archive's own top directory
	}
	x.entries++
	if x.entries > x.limits.MaxFiles {
		return &LimitError{Artifact: x.artifact, Limit: "MaxFiles", Max: int64(x.limits.MaxFiles), Seen: int64(x.entries)}
	}
	err = x.write(root, tr, hdr, name)
	if err == nil {
		return nil
	}
	var limit *LimitError
	var invalid *InvalidArtifactError
	if errors.As(err, &limit) || errors.As(err, &invalid) {
		return err
	}
	if archiveFault(err) {
		return x.unsafe(hdr.Name, err.Error())
	}
	// A malformed stream is the artifact's fault; anything else (a broken connection, a
	// full disk) may pass.
	return corrupt(err, x.artifact, fmt.Sprintf("extract %q", hdr.Name))
}

// archiveFault reports an error the archive's content caused: an entry refused up front,
// a duplicate, a file where a directory should be, a path os.Root would not follow.
func archiveFault(err error) bool {
	var refused *refusedError
	return errors.As(err, &refused) ||
		errors.Is(err, fs.ErrExist) ||
		errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.EISDIR) ||
		errors.Is(err, syscall.ELOOP) ||
		// os.Root's own refusal has no exported error to match.
		strings.Contains(err.Error(), "path escapes from parent")
}

func (x *extractor) write(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string) error {
	if hdr.Typeflag != tar.TypeDir {
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return root.MkdirAll(name, 0o755)
	case tar.TypeReg:
		return x.file(root, tr, hdr, name)
	case tar.TypeSymlink:
		return symlink(root, hdr.Linkname, name)
	case tar.TypeLink:
		return hardlink(root, hdr.Linkname, name)
	case tar.TypeChar, tar.TypeBlock:
		return x.unsafe(hdr.Name, "device files are refused")
	default:
		return x.unsafe(hdr.Name, fmt.Sprintf("entry type %q is not supported", hdr.Typeflag))
	}
}

// file writes a regular file's content, counting it against MaxBytes before a byte is
// written.
func (x *extractor) file(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string) error {
	if x.bytes+hdr.Size > x.limits.MaxBytes {
		return &LimitError{Artifact: x.artifact, Limit: "MaxBytes", Max: x.limits.MaxBytes, Seen: x.bytes + hdr.Size}
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	// O_EXCL: an entry never replaces an earlier one, nor writes through a link.
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, tr)
	x.bytes += n
	return errors.Join(err, f.Close())
}

func (x *extractor) unsafe(name, why string) error {
	return &InvalidArtifactError{Artifact: x.artifact, Reason: fmt.Sprintf("archive entry %q refused: %s", name, why)}
}

// refusedError is an entry refused before it touched the disk.
type refusedError struct{ why string }

func (e *refusedError) Error() string { return e.why }

// entryPath is name cleaned, or an error when it is absolute or climbs with "..". Any
// ".." is refused, even one that would come back down: an archive has no need of it.
func entryPath(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("absolute path")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New(`path climbs with ".."`)
		}
	}
	return path.Clean(name), nil
}

// symlink makes a relative link that, read from where it stands, stays inside the
// artifact. Links through other links are checked once all entries are written.
func symlink(root *os.Root, target, name string) error {
	if target == "" || strings.HasPrefix(target, "/") {
		return &refusedError{why: fmt.Sprintf("symlink to %q points outside the artifact", target)}
	}
	if resolved := path.Join(path.Dir(name), target); resolved == ".." || strings.HasPrefix(resolved, "../") {
		return &refusedError{why: fmt.Sprintf("symlink to %q points outside the artifact", target)}
	}
	return root.Symlink(target, name)
}

// hardlink links name to an earlier entry, named from the archive's top.
func hardlink(root *os.Root, target, name string) error {
	clean, err := entryPath(target)
	if err != nil || clean == "." {
		return &refusedError{why: fmt.Sprintf("hard link to %q points outside the artifact", target)}
	}
	if fi, err := root.Lstat(clean); err != nil || !fi.Mode().IsRegular() {
		return &refusedError{why: fmt.Sprintf("hard link to %q does not point to an earlier regular file", target)}
	}
	return root.Link(clean, name)
}

// checkLinks resolves every symlink in the extracted tree within the root: a chain of
// links that each looked inside can still lead out, or to nothing.
func (x *extractor) checkLinks(root *os.Root) error {
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", x.artifact, err)
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if _, err := root.Stat(p); err != nil {
			return x.unsafe(p, "symlink leads outside the artifact or to nothing")
		}
		return nil
	})
}
