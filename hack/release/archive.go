package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// entry is one file or directory of an archive; a directory's name ends in /.
type entry struct {
	name string
	mode int64
	uid  int
	data []byte
}

// writeTar writes entries in order, every one dated modTime, so that the same input
// makes the same bytes.
func writeTar(w io.Writer, entries []entry, modTime time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: modTime,
			Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX,
		}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	return tw.Close()
}

// tarBytes is writeTar to memory.
func tarBytes(entries []entry, modTime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	err := writeTar(&buf, entries, modTime)
	return buf.Bytes(), err
}

// writeTarGzip writes entries to path as a gzip-compressed tar.
func writeTarGzip(path string, entries []entry, modTime time.Time) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := writeTar(zw, entries, modTime); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// dirEntries lists the files under dir, with their paths relative to it, in a stable order.
func dirEntries(dir string) ([]entry, error) {
	var entries []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			entries = append(entries, entry{name: rel + "/", mode: 0o755})
			return nil
		}
		data, err := os.ReadFile(path)
		entries = append(entries, entry{name: rel, mode: 0o644, data: data})
		return err
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries, err
}
