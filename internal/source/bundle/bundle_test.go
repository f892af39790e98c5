package bundle

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// writeTree creates files (slash path → content) under a new temp dir.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// names decodes a bundle as a YAML stream and lists metadata.name of each
// object, as an applier would see them.
func names(t *testing.T, out []byte) []string {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var got []string
	for {
		var obj struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("bundle does not decode: %v\n%s", err, out)
		}
		got = append(got, obj.Metadata.Name)
	}
}

func cm(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

func TestPlainFilesAreJoinedInPathOrder(t *testing.T) {
	root := writeTree(t, map[string]string{
		"deploy/b.yaml":           cm("b"),
		"deploy/a.yaml":           "---\n" + cm("a1") + "---\n# between\n---\n" + cm("a2"),
		"deploy/a/z.yml":          cm("a-z"),
		"deploy/c.json":           `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
		"deploy/empty.yaml":       "",
		"deploy/comments.yml":     "# nothing here\n\n# still nothing\n",
		"deploy/README.md":        "# not a manifest\n",
		"deploy/.git/config.yaml": cm("hidden-git"),
		"deploy/.cache/x.yaml":    cm("hidden-cache"),
		"elsewhere.yaml":          cm("outside-path"),
	})
	out, err := Build(root, "./deploy", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// "a.yaml" sorts before "a/z.yml": '.' < '/'.
	want := []string{"a1", "a2", "a-z", "b", "c"}
	if got := names(t, out); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("objects %v, want %v\n%s", got, want, out)
	}
	if !strings.HasPrefix(string(out), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a1\n---\n") {
		t.Errorf("documents should be joined with ---:\n%s", out)
	}
}

func TestRootPathForms(t *testing.T) {
	root := writeTree(t, map[string]string{"x.yaml": cm("x"), "sub/y.yaml": cm("yy")})
	for _, p := range []string{"", ".", "./", "sub/..", "./sub/../"} {
		out, err := Build(root, p, Limits{})
		if err != nil {
			t.Fatalf("Build(%q): %v", p, err)
		}
		if got := names(t, out); strings.Join(got, ",") != "yy,x" {
			t.Errorf("Build(%q) = %v, want [yy x]", p, got)
		}
	}
}

func TestPathsOutsideTheSourceAreRefused(t *testing.T) {
	outside := writeTree(t, map[string]string{"secret.yaml": cm("secret")})
	root := writeTree(t, map[string]string{"deploy/ok.yaml": cm("ok")})
	mustSymlink(t, outside, filepath.Join(root, "escape"))
	mustSymlink(t, filepath.Join(outside, "secret.yaml"), filepath.Join(root, "deploy", "leak.yaml"))

	for _, p := range []string{"..", "../x", "deploy/../..", "/etc", "escape"} {
		_, err := Build(root, p, Limits{})
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("Build(%q) = %v, want a *PathError", p, err)
		}
	}
	_, err := Build(root, "deploy", Limits{})
	var pe *PathError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "leak.yaml") {
		t.Errorf("a symlinked file leading outside = %v, want a *PathError naming it", err)
	}
}

func TestSymlinksInsideTheSourceAreRead(t *testing.T) {
	root := writeTree(t, map[string]string{"shared/x.yaml": cm("x"), "deploy/own.yaml": cm("own")})
	mustSymlink(t, filepath.Join(root, "shared", "x.yaml"), filepath.Join(root, "deploy", "x.yaml"))
	mustSymlink(t, filepath.Join(root, "shared"), filepath.Join(root, "deploy", "linked"))
	out, err := Build(root, "deploy", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, out); strings.Join(got, ",") != "own,x" {
		t.Errorf("objects %v, want [own x] (symlinked dirs are not descended)", got)
	}
}

func TestMissingPathAndFile(t *testing.T) {
	root := writeTree(t, map[string]string{"deploy/a.yaml": cm("a")})
	_, err := Build(root, "deploy/nope", Limits{})
	var pe *PathError
	if !errors.As(err, &pe) || err.Error() != `path "deploy/nope" does not exist in the source` {
		t.Errorf("missing path = %v", err)
	}
	_, err = Build(root, "deploy/a.yaml", Limits{})
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("file path = %v", err)
	}
}

func TestEmptyPathIsAnError(t *testing.T) {
	root := writeTree(t, map[string]string{"docs/README.md": "hi\n", "docs/notes.yaml": "# only a comment\n"})
	if err := os.Mkdir(filepath.Join(root, "void"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"docs", "void"} {
		_, err := Build(root, p, Limits{})
		var ee *EmptyError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "holds no *.yaml, *.yml or *.json") {
			t.Errorf("Build(%q) = %v, want an *EmptyError", p, err)
		}
	}
}

func TestLimits(t *testing.T) {
	root := writeTree(t, map[string]string{"a.yaml": cm("a"), "b.yaml": cm("b"), "c.yaml": cm("c")})
	for _, tc := range []struct {
		limits Limits
		bound  string
	}{
		{Limits{MaxFiles: 2}, "files"},
		{Limits{MaxBytes: 100}, "bytes"},
	} {
		_, err := Build(root, ".", tc.limits)
		var le *LimitError
		if !errors.As(err, &le) || le.Bound != tc.bound {
			t.Errorf("Build with %+v = %v, want a *LimitError on %s", tc.limits, err, tc.bound)
		}
	}
	if _, err := Build(root, ".", Limits{MaxFiles: 3, MaxBytes: 1 << 20}); err != nil {
		t.Errorf("Build within the limits: %v", err)
	}
}

func TestBadYAMLNamesTheFile(t *testing.T) {
	root := writeTree(t, map[string]string{"bad.json": "{not json"})
	if _, err := Build(root, ".", Limits{}); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("Build of bad JSON = %v, want an error naming bad.json", err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
