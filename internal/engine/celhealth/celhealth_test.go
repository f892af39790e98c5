package celhealth_test

import (
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/celhealth"
)

var certificate = vidrav1alpha1.HealthCheck{
	APIVersion: "cert-manager.io/v1", Kind: "Certificate",
	InProgress: "status.?conditions.orValue([]).exists(c, c.type == 'Issuing' && c.status == 'True')",
	Failed:     "status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'False')",
	Current:    "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
}

func object(apiVersion, kind string, generation int64, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "web", "generation": generation}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func conditions(pairs ...string) map[string]any {
	var list []any
	for i := 0; i+1 < len(pairs); i += 2 {
		list = append(list, map[string]any{"type": pairs[i], "status": pairs[i+1]})
	}
	return map[string]any{"conditions": list}
}

// The expressions are asked as Flux asks them: a lagging observedGeneration first, then
// inProgress, failed and current, the first true one winning; none true, or one that
// cannot be evaluated yet, is in progress, saying which.
func TestChecksTellTheStateOfTheirKind(t *testing.T) {
	var c celhealth.Compiler
	checks, err := c.Compile([]vidrav1alpha1.HealthCheck{certificate})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		obj  *unstructured.Unstructured
		want status.Status
		says string
	}{
		"ready":              {object("cert-manager.io/v1", "Certificate", 1, conditions("Ready", "True")), status.CurrentStatus, "current"},
		"issuing and ready":  {object("cert-manager.io/v1", "Certificate", 1, conditions("Ready", "True", "Issuing", "True")), status.InProgressStatus, "inProgress"},
		"not ready":          {object("cert-manager.io/v1", "Certificate", 1, conditions("Ready", "False")), status.FailedStatus, "failed"},
		"no status yet":      {object("cert-manager.io/v1", "Certificate", 1, nil), status.InProgressStatus, "current"},
		"neither":            {object("cert-manager.io/v1", "Certificate", 1, conditions("Other", "True")), status.InProgressStatus, "no healthCheckExprs"},
		"generation lagging": {object("cert-manager.io/v1", "Certificate", 2, map[string]any{"observedGeneration": int64(1), "conditions": conditions("Ready", "True")["conditions"]}), status.InProgressStatus, "observedGeneration 1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := checks.Compute(tc.obj)
			if !ok || got.Status != tc.want || !strings.Contains(got.Message, tc.says) {
				t.Errorf("Compute = %+v, %v; want %s saying %q", got, ok, tc.want, tc.says)
			}
		})
	}
	if _, ok := checks.Compute(object("cert-manager.io/v2", "Certificate", 1, nil)); ok {
		t.Error("a check of v1 judged v2: each names its own version")
	}
	var none *celhealth.Checks
	if _, ok := none.Compute(object("v1", "ConfigMap", 1, nil)); ok {
		t.Error("no checks judged an object")
	}
}

// An expression that does not compile, or does not return a bool, is refused, naming
// the check, the field and the expression.
func TestAnExpressionThatDoesNotCompileIsNamed(t *testing.T) {
	var c celhealth.Compiler
	for expr, want := range map[string]string{
		"status.phase ==":       `healthCheckExprs[1].current (Widget example.com/v1) "status.phase =="`,
		"size(status) + 1":      "not a bool",
		"widget.status == 'ok'": "undeclared reference to 'widget'",
	} {
		_, err := c.Compile([]vidrav1alpha1.HealthCheck{certificate, {APIVersion: "example.com/v1", Kind: "Widget", Current: expr}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%q) = %v, want it to say %q", expr, err, want)
		}
	}
}
