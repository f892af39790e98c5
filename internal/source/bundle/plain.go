package bundle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// buildPlain joins the manifest files under src.dir, in lexical order of
// their slash-separated paths, skipping hidden directories such as .git.
// Symlinks are read if they stay inside the source; symlinked directories
// are not descended, so no walk can loop.
func buildPlain(src *source, b *budget) ([]byte, error) {
	files, err := manifestFiles(src)
	if err != nil {
		return nil, err
	}
	// Sized once: a buffer that doubles as it goes holds up to three times the bundle.
	var out bytes.Buffer
	var total int64
	for _, f := range files {
		total += f.size + int64(len("---\n"))
	}
	if b.limits.MaxBytes > 0 {
		total = min(total, b.limits.MaxBytes)
	}
	out.Grow(int(total))
	for _, f := range files {
		if err := b.read(f.size); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", src.rel(f.path), err)
		}
		docs, err := documents(data, strings.EqualFold(filepath.Ext(f.path), ".json"))
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", src.rel(f.path), err)
		}
		for _, d := range docs {
			if out.Len() > 0 {
				out.WriteString("---\n")
			}
			out.Write(d)
		}
	}
	if out.Len() == 0 {
		return nil, &EmptyError{Path: src.shown}
	}
	return out.Bytes(), nil
}

type manifestFile struct {
	path string // resolved, absolute
	key  string // slash path below src.dir, the sort key
	size int64
}

func manifestFiles(src *source) ([]manifestFile, error) {
	var files []manifestFile
	err := filepath.WalkDir(src.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != src.dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !isManifest(d.Name()) {
			return nil
		}
		target := p
		if d.Type()&fs.ModeSymlink != 0 {
			if target, err = filepath.EvalSymlinks(p); err != nil {
				return fmt.Errorf("resolve symlink %s: %w", src.rel(p), err)
			}
			if !within(src.root, target) {
				return &PathError{Path: src.rel(p), Reason: "is a symlink leading outside the source"}
			}
		}
		info, err := os.Stat(target)
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		key, err := filepath.Rel(src.dir, p)
		if err != nil {
			return err
		}
		files = append(files, manifestFile{path: target, key: filepath.ToSlash(key), size: info.Size()})
		return nil
	})
	if err != nil {
		var pathErr *PathError
		if errors.As(err, &pathErr) {
			return nil, pathErr
		}
		return nil, fmt.Errorf("list manifests under %q: %w", src.shown, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].key < files[j].key })
	return files, nil
}

func isManifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// documents splits a file into its YAML documents, each ending in a
// newline, dropping those that hold only comments or blank lines. A JSON
// file is one document, converted to YAML.
func documents(data []byte, isJSON bool) ([][]byte, error) {
	if isJSON {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, nil
		}
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return nil, fmt.Errorf("convert JSON to YAML: %w", err)
		}
		return [][]byte{y}, nil
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split YAML documents: %w", err)
		}
		if onlyComments(doc) {
			continue
		}
		// The reader keeps a separator line that opens a document.
		for bytes.HasPrefix(doc, []byte("---")) {
			_, doc, _ = bytes.Cut(doc, []byte("\n"))
		}
		doc = bytes.TrimRight(doc, "\n")
		docs = append(docs, append(doc, '\n'))
	}
}

func onlyComments(doc []byte) bool {
	for line := range bytes.SplitSeq(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}
