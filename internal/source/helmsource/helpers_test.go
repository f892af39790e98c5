package helmsource_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/dircache"
	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

// clock is a test's time, moved by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }
func newClock() *clock                   { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func newClient(t *testing.T, c *clock) *helmsource.Client {
	t.Helper()
	return helmsource.New(helmsource.Options{
		Now: c.Now,
		OCI: ocisource.NewCache(dircache.New(t.TempDir(), "fill-", 32, 0), ocisource.Limits{}),
	})
}

// repoWith serves a repository holding chart name at each of versions.
func repoWith(t *testing.T, name string, versions []string, opts ...helmrepo.Option) *helmrepo.Repo {
	t.Helper()
	repo := helmrepo.NewRepo(t, opts...)
	for _, v := range versions {
		repo.Add(helmrepo.Chart(t, name, v))
	}
	return repo
}

func src(repo *helmrepo.Repo, chart, version string) helmsource.Source {
	return helmsource.Source{RepoURL: repo.URL(), Chart: chart, Version: version, InsecureHTTP: true}
}

// requireErrorAs fails the test unless err is a T saying each of contains.
func requireErrorAs[T error](t *testing.T, err error, contains ...string) {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("error %v (%T) is not a %T", err, err, target)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// entry is a file of an archive a test crafts: data, or zeros bytes of zeros.
type entry struct {
	name  string
	data  []byte
	zeros int64
}

// tgz is a gzipped tar of entries, in order, written as the test says (not as
// `helm package` would).
func tgz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		content := io.Reader(bytes.NewReader(e.data))
		size := int64(len(e.data))
		if e.zeros > 0 {
			content, size = io.LimitReader(zeros{}, e.zeros), e.zeros
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, content); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// chartYAML is a minimal Chart.yaml of chart name.
func chartYAML(name string) []byte {
	return []byte("apiVersion: v2\nname: " + name + "\nversion: 1.0.0\n")
}
