package helmsource_test

import (
	"testing"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

func TestARenderingOverMaxBytesIsRefused(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.HooksChart, "1.0.0")
	full := render(t, ch, opts()).Manifest

	o := opts()
	o.MaxBytes = len(full)
	if r := render(t, ch, o); len(r.Manifest) != len(full) {
		t.Fatalf("at exactly MaxBytes: %d bytes, want %d", len(r.Manifest), len(full))
	}
	o.MaxBytes = len(full) - 1
	_, err := helmsource.Render(ch, o)
	requireErrorAs[*helmsource.LimitError](t, err, "MaxBundleBytes", "hooks-chart 1.0.0")
}
