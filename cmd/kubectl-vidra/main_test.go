package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// fleet is a real hub (Vidra's CRDs installed, no operator running) and one member. The
// tests write what the operator would write, run the plugin in-process and read its output
// as a user would.
var fleet *testfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{Members: 1}, func(f *testfleet.Fleet) { fleet = f }))
}

// runPlugin runs "kubectl vidra ARGS..." and returns what it wrote to stdout and stderr.
func runPlugin(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := newRootCommand(streams)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// hubKubeconfig writes the hub's admin kubeconfig into a temporary directory of the test.
func hubKubeconfig(t *testing.T) string {
	t.Helper()
	path, err := fleet.Hub.WriteKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// table is a kubectl-style table read back: cells are cut at the columns' header offsets,
// so empty cells and headers with spaces ("LAST PROBE") read right.
type table struct {
	headers []string
	rows    map[string]map[string]string // by the NAME cell, then by header
}

func parseTable(t *testing.T, out string, headers ...string) table {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 {
		t.Fatalf("no table in output:\n%s", out)
	}
	starts := make([]int, len(headers))
	from := 0
	for i, h := range headers {
		at := strings.Index(lines[0][from:], h)
		if at < 0 {
			t.Fatalf("header %q missing or out of order in %q", h, lines[0])
		}
		starts[i] = from + at
		from = starts[i] + len(h)
	}
	if rest := strings.TrimSpace(lines[0][from:]); rest != "" {
		t.Fatalf("header line %q has unexpected columns after %v: %q", lines[0], headers, rest)
	}
	tb := table{headers: headers, rows: map[string]map[string]string{}}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, h := range headers {
			end := len(line)
			if i+1 < len(headers) {
				end = min(starts[i+1], len(line))
			}
			if starts[i] < len(line) {
				row[h] = strings.TrimSpace(line[starts[i]:end])
			}
		}
		tb.rows[row[headers[0]]] = row
	}
	return tb
}

// row returns the row whose first cell is name.
func (tb table) row(t *testing.T, name string) map[string]string {
	t.Helper()
	r, ok := tb.rows[name]
	if !ok {
		t.Fatalf("no row %q in table", name)
	}
	return r
}

// expectRow checks the cells of the row named name.
func (tb table) expectRow(t *testing.T, name string, want map[string]string) {
	t.Helper()
	got := tb.row(t, name)
	for h, v := range want {
		if got[h] != v {
			t.Errorf("row %s, column %s: got %q, want %q", name, h, got[h], v)
		}
	}
}
