package operator

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vidra-operator/vidra/providers/secret"
)

// descRecorder is a prometheus.Registerer that keeps the names of what is registered.
type descRecorder struct{ names []string }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *descRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names = append(r.names, m[1])
		}
	}
	return nil
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *descRecorder) Unregister(prometheus.Collector) bool { return true }

// exported lists every metric the operator registers: the controllers' (registerMetrics,
// as New calls it) and the cluster provider's.
func exported(t *testing.T) []string {
	t.Helper()
	rec := &descRecorder{}
	if _, err := registerMetrics(rec, nil, false, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if _, err := secret.New(logr.Discard(), secret.Options{Namespace: "vidra-system", Scheme: runtime.NewScheme(), Metrics: rec}); err != nil {
		t.Fatal(err)
	}
	return rec.names
}

var metricName = regexp.MustCompile(`\bvidra_[a-z0-9_]+\b`)

// used lists the vidra_ metrics an expression uses, histogram series named by their
// histogram.
func used(expr string, histograms []string) []string {
	var out []string
	for _, name := range metricName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(histograms, base) {
				name = base
			}
		}
		out = append(out, name)
	}
	return out
}

// Every metric the chart's Grafana dashboard and PrometheusRule use is one the operator
// exports, and every panel and alert uses at least one of them.
func TestChartDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	names := exported(t)
	histograms := []string{"vidra_reconcile_duration_seconds", "vidra_sync_duration_seconds"}
	for _, h := range histograms {
		if !slices.Contains(names, h) {
			t.Fatalf("histogram %s is not exported", h)
		}
	}
	for _, want := range []string{"vidra_cluster_ready", "vidra_resource_ready", "vidra_sync_ready", "vidra_rollout_failed", "vidra_cluster_credential_expiry_seconds"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not exported (exported: %v)", want, names)
		}
	}

	data, err := os.ReadFile("../charts/vidra/dashboards/vidra-fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(dashboard.Panels) < 10 {
		t.Errorf("the dashboard has %d panels", len(dashboard.Panels))
	}
	for _, p := range dashboard.Panels {
		var all []string
		for _, target := range p.Targets {
			all = append(all, used(target.Expr, histograms)...)
		}
		if len(all) == 0 {
			t.Errorf("panel %q uses no vidra_ metric", p.Title)
		}
		for _, name := range all {
			if !slices.Contains(names, name) {
				t.Errorf("panel %q uses %s, which the operator does not export", p.Title, name)
			}
		}
	}

	rules, err := os.ReadFile("../charts/vidra/templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, line := range strings.Split(string(rules), "\n") {
		expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:")
		if !ok {
			continue
		}
		alerts++
		inExpr := used(expr, histograms)
		if len(inExpr) == 0 {
			t.Errorf("alert expression %q uses no vidra_ metric", expr)
		}
		for _, name := range inExpr {
			if !slices.Contains(names, name) {
				t.Errorf("alert expression %q uses %s, which the operator does not export", expr, name)
			}
		}
	}
	if alerts < 5 {
		t.Errorf("%d alerts in the PrometheusRule", alerts)
	}
}
