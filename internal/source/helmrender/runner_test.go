package helmrender_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/helmrender"
	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

// TestMain makes the test binary a render process when it is run as one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helmrender.Command {
		os.Exit(helmrender.Main(os.Stdin, os.Stdout, os.Stderr, os.Args[2:]))
	}
	os.Exit(m.Run())
}

func newRunner(t *testing.T, opts helmrender.Options) *helmrender.Runner {
	t.Helper()
	opts.Command = []string{os.Args[0], helmrender.Command}
	r, err := helmrender.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func renderOptions() helmsource.RenderOptions {
	return helmsource.RenderOptions{
		ReleaseName: "web", Namespace: "apps", IncludeCRDs: true,
		Values:       map[string]any{"image": "nginx:1.27", "replicas": 2},
		Capabilities: helmsource.Capabilities{KubeVersion: "v1.36.0", APIVersions: []string{"v1", "apps/v1", "batch/v1"}},
	}
}

func TestAChildRendersAsTheOperatorWould(t *testing.T) {
	for _, name := range []string{helmrepo.HooksChart, helmrepo.CRDsChart, helmrepo.CapsChart} {
		ch := helmrepo.Chart(t, name, "1.2.3")
		opts := renderOptions()
		if name == helmrepo.CapsChart {
			opts.Values = map[string]any{"greeting": "hello", "replicas": 3}
		}
		want, err := helmsource.Render(ch, opts)
		if err != nil {
			t.Fatalf("%s in the operator: %v", name, err)
		}
		got, err := newRunner(t, helmrender.Options{}).Render(context.Background(), ch, opts)
		if err != nil {
			t.Fatalf("%s in a child: %v", name, err)
		}
		if string(got.Manifest) != string(want.Manifest) || strings.Join(got.Dropped, ",") != strings.Join(want.Dropped, ",") {
			t.Errorf("%s: a child rendered\n%s\ndropping %v; the operator renders\n%s\ndropping %v", name, got.Manifest, got.Dropped, want.Manifest, want.Dropped)
		}
	}
}

func TestAChartOverABoundStopsItsChildNotTheOperator(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template string
		opts     helmrender.Options
		check    func(t *testing.T, err error)
	}{
		{"a string of 1.5 GB", `data: {{ repeat 1500000000 "x" }}`, helmrender.Options{MaxMemory: 256 << 20},
			limitOn(helmrender.BoundMemory, "needed more than 256 MiB of memory", "--helm-render-max-memory")},
		{"a loop that never ends", `{{ range $i := until 100000 }}{{ range $j := until 100000 }}{{ if eq $j -1 }}{{ $j }}{{ end }}{{ end }}{{ end }}`, helmrender.Options{Timeout: 2 * time.Second},
			limitOn(helmrender.BoundTime, "took longer than 2s", "--helm-render-timeout")},
		{"a template error", `{{ fail "no" }}`, helmrender.Options{}, func(t *testing.T, err error) {
			var limit *helmrender.LimitError
			if err == nil || errors.As(err, &limit) || !strings.Contains(err.Error(), "no") {
				t.Fatalf("Render = %v, want the template's error", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := helmrepo.ChartWith(t, helmrepo.HooksChart, "1.0.0", map[string]string{"templates/hostile.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile\n" + tc.template + "\n"})
			_, err := newRunner(t, tc.opts).Render(context.Background(), ch, renderOptions())
			tc.check(t, err)
		})
	}
}

func limitOn(bound string, texts ...string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var limit *helmrender.LimitError
		if !errors.As(err, &limit) || limit.Bound != bound {
			t.Fatalf("Render = %v, want a *LimitError on %s", err, bound)
		}
		for _, text := range append(texts, "hooks-chart 1.0.0") {
			if !strings.Contains(err.Error(), text) {
				t.Errorf("error %q should say %q", err, text)
			}
		}
	}
}

func TestARenderingOverMaxBytesIsRefusedInTheChild(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.HooksChart, "1.0.0")
	opts := renderOptions()
	opts.MaxBytes = 100
	_, err := newRunner(t, helmrender.Options{}).Render(context.Background(), ch, opts)
	var limit *helmsource.LimitError
	if !errors.As(err, &limit) || limit.Limit != "MaxBundleBytes" {
		t.Fatalf("Render = %v, want a *helmsource.LimitError on MaxBundleBytes", err)
	}
}

// A process that fails without a reply is the machine's failure, not the chart's.
func TestAProcessThatAnswersNothingIsAProcessError(t *testing.T) {
	r, err := helmrender.New(helmrender.Options{Command: []string{"/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Render(context.Background(), helmrepo.Chart(t, helmrepo.HooksChart, "1.0.0"), renderOptions())
	var process *helmrender.ProcessError
	var limit *helmrender.LimitError
	if !errors.As(err, &process) || errors.As(err, &limit) {
		t.Fatalf("Render with /bin/false = %v, want a *ProcessError", err)
	}
}
