package helmsource_test

import (
	"fmt"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// subchart is an archive of chart name holding 5 files of 4 MiB of zeros: 20 MiB that
// compress to a few KB, each file under the loader's own 5 MiB bound.
func subchart(t *testing.T, name string) []byte {
	t.Helper()
	entries := []entry{{name: name + "/Chart.yaml", data: chartYAML(name)}}
	for i := range 5 {
		entries = append(entries, entry{name: fmt.Sprintf("%s/files/%d", name, i), zeros: 4 << 20})
	}
	return tgz(t, entries...)
}

// bomb is chart "bomb" with a subchart archive of 20 MiB for each of names.
func bomb(t *testing.T, names ...string) []byte {
	t.Helper()
	entries := []entry{{name: "bomb/Chart.yaml", data: chartYAML("bomb")}}
	for _, n := range names {
		entries = append(entries, entry{name: "bomb/charts/" + n + ".tgz", data: subchart(t, n)})
	}
	return tgz(t, entries...)
}

// nested is chart "l0" whose subchart archive holds a subchart archive, and so on,
// levels deep.
func nested(t *testing.T, levels int) []byte {
	t.Helper()
	name := fmt.Sprintf("l%d", levels)
	archive := tgz(t, entry{name: name + "/Chart.yaml", data: chartYAML(name)})
	for i := levels - 1; i >= 0; i-- {
		name, inner := fmt.Sprintf("l%d", i), name
		archive = tgz(t,
			entry{name: name + "/Chart.yaml", data: chartYAML(name)},
			entry{name: name + "/charts/" + inner + ".tgz", data: archive})
	}
	return archive
}

func fetchArchive(t *testing.T, c *helmsource.Client, name, version string, data []byte) error {
	t.Helper()
	repo := helmrepo.NewRepo(t)
	repo.AddArchive(name, version, data)
	s := src(repo, name, version)
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(t.Context(), s, v)
	return err
}

func TestSubchartArchivesShareOneExpansionBudget(t *testing.T) {
	c := newClient(t, newClock())
	// One subchart of 20 MiB is within the default 32 MiB.
	if err := fetchArchive(t, c, "bomb", "1.0.0", bomb(t, "a")); err != nil {
		t.Fatalf("a chart of 20 MiB: %v", err)
	}
	// Two are not, though the loader gives each archive a budget of its own.
	data := bomb(t, "a", "b")
	if len(data) > 64<<10 {
		t.Fatalf("the bomb is %d bytes", len(data))
	}
	err := fetchArchive(t, c, "bomb", "2.0.0", data)
	requireErrorAs[*helmsource.LimitError](t, err, "MaxExpandedBytes", "bomb-2.0.0.tgz")
}

func TestTheExpansionBudgetIsALimit(t *testing.T) {
	c := helmsource.New(helmsource.Options{Limits: helmsource.Limits{MaxExpandedBytes: 16 << 20}})
	err := fetchArchive(t, c, "bomb", "1.0.0", bomb(t, "a"))
	requireErrorAs[*helmsource.LimitError](t, err, "MaxExpandedBytes")
}

func TestOCISubchartArchivesShareOneExpansionBudget(t *testing.T) {
	reg := ociregistry.New(t)
	url := helmrepo.PushOCIArchive(t, reg, "charts", "bomb", "1.0.0", bomb(t, "a", "b"))
	c := newClient(t, newClock())
	s := helmsource.Source{RepoURL: url, Chart: "bomb", Version: "1.0.0", InsecureHTTP: true}
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(t.Context(), s, v)
	requireErrorAs[*helmsource.LimitError](t, err, "MaxExpandedBytes", "bomb@sha256:")
}

func TestArchivesNestedTooDeepAreRefused(t *testing.T) {
	c := newClient(t, newClock())
	if err := fetchArchive(t, c, "l0", "1.0.0", nested(t, 5)); err != nil {
		t.Fatalf("subcharts 5 archives deep: %v", err)
	}
	err := fetchArchive(t, c, "l0", "2.0.0", nested(t, 6))
	requireErrorAs[*helmsource.LimitError](t, err, "MaxChartNesting")
}

func TestArchivesWithTooManyEntriesAreRefused(t *testing.T) {
	entries := []entry{{name: "many/Chart.yaml", data: chartYAML("many")}}
	for i := range 10000 {
		entries = append(entries, entry{name: fmt.Sprintf("many/files/%d", i)})
	}
	err := fetchArchive(t, newClient(t, newClock()), "many", "1.0.0", tgz(t, entries...))
	requireErrorAs[*helmsource.LimitError](t, err, "MaxChartEntries")
}
