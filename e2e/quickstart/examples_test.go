package quickstart

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// example is a fenced block of a page, and the test marker before it, if any:
// <!-- test: NAME --> runs it in the step NAME, <!-- test: skip (why) --> does not, and
// <!-- test: NAME, as FILE --> writes a YAML example to FILE, which a later example of
// the step applies, as the page says.
type example struct {
	marker, lang, body string
	line               int
}

var (
	fence  = regexp.MustCompile("(?ms)^(<!-- test: ([^>]*?) -->\n)?```(\\w+)\n(.*?)^```\n")
	writes = regexp.MustCompile(`(?m)^\s*(kubectl( -n \S+)? (apply|create)|helm (install|upgrade)|kubectl vidra (enroll|upload))\b`)
	object = regexp.MustCompile(`(?m)^kind: \w+$`)
)

// examplesOf reads the fenced blocks of page.
func examplesOf(t *testing.T, page string) []example {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var found []example
	for _, m := range fence.FindAllSubmatchIndex(text, -1) {
		ex := example{lang: string(text[m[6]:m[7]]), body: string(text[m[8]:m[9]]), line: 1 + strings.Count(string(text[:m[0]]), "\n")}
		if m[4] >= 0 {
			ex.marker = string(text[m[4]:m[5]])
		}
		found = append(found, ex)
	}
	return found
}

// creates says whether the example creates objects: what a user runs to get started.
// Examples that change what exists (annotate, patch, rollback) assume a state of their
// own and are not held to run.
func (e example) creates() bool {
	switch e.lang {
	case "sh":
		return writes.MatchString(e.body)
	case "yaml":
		return object.MatchString(e.body)
	}
	return false
}

// step is the name of the step that runs the example ("" for none).
func (e example) step() string {
	name, _, _ := strings.Cut(e.marker, " ")
	name = strings.TrimSuffix(name, ",")
	if name == "skip" {
		return ""
	}
	return name
}

// script is what a user types for the example: a YAML one goes to kubectl apply, or to
// the file its marker names.
func (e example) script() string {
	if e.lang != "yaml" {
		return e.body
	}
	if _, file, ok := strings.Cut(e.marker, ", as "); ok {
		return "cat > " + file + " <<'YAML'\n" + e.body + "YAML\n"
	}
	return "kubectl apply -f - <<'YAML'\n" + e.body + "YAML\n"
}

// scriptsByStep gathers the scripts of page by step, in the page's order, and fails for
// an example that creates objects yet says neither which step runs it nor why none does.
func scriptsByStep(t *testing.T, page string) map[string][]string {
	t.Helper()
	scripts := map[string][]string{}
	for _, e := range examplesOf(t, page) {
		if e.marker == "" && e.creates() {
			t.Errorf("%s:%d: an example that creates objects has no <!-- test: STEP --> (or <!-- test: skip (why) -->) before it", page, e.line)
		}
		if step := e.step(); step != "" {
			scripts[step] = append(scripts[step], e.script())
		}
	}
	return scripts
}

// TestEveryExampleThatCreatesObjectsIsRun: no page a user reads shows an example that
// creates objects without a test that runs it, or a reason why none does.
func TestEveryExampleThatCreatesObjectsIsRun(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no page in docs/ (%v)", err)
	}
	for _, page := range append(pages, "../../README.md", "../../charts/vidra/README.md") {
		scriptsByStep(t, page)
	}
}
