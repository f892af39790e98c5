package helmsource_test

import (
	"errors"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

func TestVersionSelection(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "v0.9.0", "0.1.0", "0.2.0"})
	c := newClient(t, newClock())
	for want, expected := range map[string]string{
		"":             "1.10.0", // newest stable: 2.0.0-rc.1 is a pre-release
		"1.2.0":        "1.2.0",
		"v1.2.0":       "1.2.0",
		"0.9.0":        "v0.9.0",
		"~1.2":         "1.2.0",
		"^1":           "1.10.0",
		">=2.0.0-0":    "2.0.0-rc.1",
		"2.0.0-rc.1":   "2.0.0-rc.1",
		">=0.1 <1.0.0": "v0.9.0",
	} {
		v, err := c.Resolve(t.Context(), src(repo, helmrepo.CapsChart, want))
		if err != nil {
			t.Errorf("Resolve(%q): %v", want, err)
			continue
		}
		if v.Version != expected || v.Chart != helmrepo.CapsChart {
			t.Errorf("Resolve(%q) = %s %s, want %s", want, v.Chart, v.Version, expected)
		}
	}
}

func TestNoMatchingVersionListsTheNewest(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "v0.9.0", "0.1.0", "0.2.0"})
	c := newClient(t, newClock())
	_, err := c.Resolve(t.Context(), src(repo, helmrepo.CapsChart, ">=3"))
	requireErrorAs[*helmsource.NotFoundError](t, err, `"caps-chart"`, `">=3"`, "2.0.0-rc.1, 1.10.0, 1.2.0, 1.0.0, v0.9.0")
	if nf := (*helmsource.NotFoundError)(nil); errors.As(err, &nf) && len(nf.Available) != 5 {
		t.Errorf("available %v, want the 5 newest", nf.Available)
	}
	_, err = c.Resolve(t.Context(), src(repo, helmrepo.CapsChart, "1.3.0"))
	requireErrorAs[*helmsource.NotFoundError](t, err, "1.3.0")
	_, err = c.Resolve(t.Context(), src(repo, "no-such-chart", ""))
	requireErrorAs[*helmsource.NotFoundError](t, err, `chart "no-such-chart" not found`)
}
