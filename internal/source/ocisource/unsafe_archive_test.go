package ocisource_test

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

func TestPullRefusesEntriesThatReachOutside(t *testing.T) {
	for name, c := range map[string]struct {
		entries []entry
		wantIn  string
	}{
		"dot-dot path":  {entries: []entry{file("ok.yaml", "a"), file("../evil", "x")}, wantIn: `"../evil" refused`},
		"inner dot-dot": {entries: []entry{file("a/../../evil", "x")}, wantIn: "climbs"},
		"absolute path": {entries: []entry{file("/tmp/evil", "x")}, wantIn: "absolute"},
		"symlink out":   {entries: []entry{symlinkEntry("link", "../../etc")}, wantIn: "points outside"},
		"absolute link": {entries: []entry{symlinkEntry("link", "/etc/passwd")}, wantIn: "points outside"},
		// Each link looks inside from where it stands; together they lead out.
		"symlink chain":      {entries: []entry{symlinkEntry("s", "."), symlinkEntry("s/t", "../x")}, wantIn: "leads outside"},
		"dangling link":      {entries: []entry{symlinkEntry("link", "nothing")}, wantIn: "to nothing"},
		"write through link": {entries: []entry{symlinkEntry("link", "."), file("link/../../evil", "x")}, wantIn: "climbs"},
		"hard link out":      {entries: []entry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "../../etc/passwd"}}}, wantIn: "hard link"},
		"device file":        {entries: []entry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}}, wantIn: "device"},
		"fifo":               {entries: []entry{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "pipe"}}}, wantIn: "not supported"},
		"duplicate":          {entries: []entry{file("a", "1"), file("a", "2")}, wantIn: `"a" refused`},
	} {
		t.Run(name, func(t *testing.T) {
			reg := ociregistry.New(t)
			reg.PushLayer(t, "app", "v1", ociregistry.FluxContentMediaType, tarGz(t, c.entries...))

			_, root, err := pullOne(t, reg, ocisource.Limits{})
			requireInvalidArtifact(t, err, c.wantIn)
			// The cache root holds nothing: neither the artifact nor what climbed out of it.
			requireNoArtifactDirs(t, root)
		})
	}
}

func TestPullKeepsLinksThatStayInside(t *testing.T) {
	reg := ociregistry.New(t)
	reg.PushLayer(t, "app", "v1", ociregistry.FluxContentMediaType, tarGz(t,
		file("base/app.yaml", "kind: Deployment\n"),
		symlinkEntry("overlay/app.yaml", "../base/app.yaml"),
		entry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "copy.yaml", Linkname: "base/app.yaml"}},
		file("./top.yaml", "kind: Service\n"),
	))

	dir, _, err := pullOne(t, reg, ocisource.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"overlay/app.yaml", "copy.yaml"} {
		if got := readFile(t, dir, name); got != "kind: Deployment\n" {
			t.Errorf("%s = %q", name, got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "top.yaml")); err != nil {
		t.Error(err)
	}
}
