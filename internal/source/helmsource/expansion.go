package helmsource

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Helm's loader bounds each archive on its own (100 MiB), and gives every subchart
// archive in charts/ a fresh bound, so a few KB of archives within archives can load
// hundreds of MiB. Before the loader sees a chart, its whole tree is walked here against
// one budget: every byte the loader would read, subchart archives and what they expand
// to included, and the number of entries and the depth of archives within archives.

const (
	defaultMaxExpandedBytes = 32 << 20
	// maxChartEntries bounds the files and directories of a chart and its subcharts.
	maxChartEntries = 10000
	// maxChartNesting bounds subchart archives within subchart archives; the chart's own
	// archive is level 0.
	maxChartNesting = 5
)

// Names of the bounds, as LimitError.Limit gives them.
const (
	limitExpandedBytes = "MaxExpandedBytes"
	limitChartEntries  = "MaxChartEntries"
	limitChartNesting  = "MaxChartNesting"
)

// expansion is the budget of one chart, spent as its tree is walked.
type expansion struct {
	what    string // the chart, for errors
	max     int64
	left    int64
	entries int
}

func newExpansion(what string, maxBytes int64) *expansion {
	return &expansion{what: what, max: maxBytes, left: maxBytes}
}

// errOverBudget stops reading once the budget is spent; expansion.failed reports it.
var errOverBudget = errors.New("expansion budget spent")

// budgetReader counts what it reads against x's budget, and reads at most one byte past
// it, so that nothing is decompressed far beyond the bound.
type budgetReader struct {
	r io.Reader
	x *expansion
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.x.left < 0 {
		return 0, errOverBudget
	}
	if int64(len(p)) > b.x.left+1 {
		p = p[:b.x.left+1]
	}
	n, err := b.r.Read(p)
	b.x.left -= int64(n)
	if b.x.left < 0 {
		return n, errOverBudget
	}
	return n, err
}

// spend counts n bytes known without reading them (a file's size on disk).
func (x *expansion) spend(n int64) error {
	x.left -= n
	if x.left < 0 {
		return x.overBytes()
	}
	return nil
}

// entry counts one file or directory.
func (x *expansion) entry() error {
	x.entries++
	if x.entries > maxChartEntries {
		return &LimitError{What: x.what, Limit: limitChartEntries, Max: maxChartEntries}
	}
	return nil
}

func (x *expansion) overBytes() error {
	return &LimitError{What: x.what, Limit: limitExpandedBytes, Max: x.max}
}

// failed is err from reading the archive at (a subchart archive's path, "" for the
// chart's own): over the budget, or not a chart archive.
func (x *expansion) failed(err error, at string) error {
	if x.left < 0 || errors.Is(err, errOverBudget) {
		return x.overBytes()
	}
	if at != "" {
		return &InvalidError{Msg: fmt.Sprintf("%s: subchart archive %s is not a Helm chart archive: %v", x.what, at, err), Err: err}
	}
	return &InvalidError{Msg: fmt.Sprintf("%s is not a Helm chart archive: %v", x.what, err), Err: err}
}

// archive walks a chart archive (gzipped tar) at the given level of nesting (at is its
// path, "" for the chart's own), and each subchart archive in it, counting every
// decompressed byte: file contents, and tar headers and padding too, so that no part of
// the stream is read for free.
func (x *expansion) archive(r io.Reader, level int, at string) error {
	if level > maxChartNesting {
		return &LimitError{What: x.what, Limit: limitChartNesting, Max: maxChartNesting}
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return x.failed(err, at)
	}
	defer func() { _ = zr.Close() }()
	tr := tar.NewReader(&budgetReader{r: zr, x: x})
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return x.failed(err, at)
		}
		if err := x.entry(); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > x.left {
			return x.overBytes() // known from the header: no need to read it
		}
		if hdr.Typeflag == tar.TypeReg && subchartArchive(entryRel(hdr.Name)) {
			if err := x.archive(tr, level+1, path.Join(at, hdr.Name)); err != nil {
				return err
			}
		}
		// Whatever the subchart's walk left unread, and every other file, still counts.
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return x.failed(err, at)
		}
	}
}

// entryRel is an archive entry's path within the chart, as the loader reads it: without
// its first element (the chart's directory), with "\" for "/" when it has any.
func entryRel(name string) string {
	sep := "/"
	if strings.Contains(name, `\`) {
		sep = `\`
	}
	_, rel, _ := strings.Cut(name, sep)
	return path.Clean(strings.ReplaceAll(rel, sep, "/"))
}

// subchartArchive reports whether the loader unpacks the file at rel (a path within a
// chart) as a subchart archive: charts/<name>.tgz, in the chart or in a subchart
// directory (charts/<dir>/charts/<name>.tgz, …). Names starting "_" or "." the loader
// skips.
func subchartArchive(rel string) bool {
	parts := strings.Split(rel, "/")
	for len(parts) >= 2 && parts[0] == "charts" {
		name := parts[1]
		if name == "" || strings.IndexAny(name, "_.") == 0 || path.Ext(name) == ".tgz" && len(parts) > 2 {
			return false
		}
		if len(parts) == 2 {
			return path.Ext(name) == ".tgz"
		}
		parts = parts[2:]
	}
	return false
}

// dir walks a chart directory as the loader does (following symbolic links), counting
// each file's size and walking each subchart archive. rel is dir's path in the chart.
func (x *expansion) dir(dir, rel string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read chart directory: %w", err)
	}
	for _, e := range entries {
		if err := x.entry(); err != nil {
			return err
		}
		full, name := filepath.Join(dir, e.Name()), path.Join(rel, e.Name())
		fi, err := os.Stat(full)
		if err != nil {
			return fmt.Errorf("read chart file %s: %w", name, err)
		}
		switch {
		case fi.IsDir():
			err = x.dir(full, name)
		case !fi.Mode().IsRegular():
			continue // the loader refuses it
		case subchartArchive(name):
			err = x.archiveFile(full, name)
		default:
			err = x.spend(fi.Size())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// archiveFile walks the subchart archive at full, counting its own bytes as well as what
// it expands to: the loader holds both.
func (x *expansion) archiveFile(full, name string) error {
	f, err := os.Open(filepath.Clean(full))
	if err != nil {
		return fmt.Errorf("read chart file %s: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	r := &budgetReader{r: f, x: x}
	if err := x.archive(r, 1, name); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return x.failed(err, name)
	}
	return nil
}
