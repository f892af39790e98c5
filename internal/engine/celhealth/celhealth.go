// Package celhealth tells the health of objects of the kinds a bundle names with CEL
// expressions, as Flux's Kustomization spec.healthCheckExprs (RFC-0009): an object whose
// status.observedGeneration lags its metadata.generation is in progress; else the first
// of inProgress, failed and current that is true says its state, and none, in progress.
// The expressions see the object's top-level fields.
package celhealth

import (
	"fmt"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/lru"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Variables are the top-level fields of an object an expression may name.
var variables = []string{"apiVersion", "kind", "metadata", "spec", "status", "data"}

// Compiler compiles expressions once: programs are kept by their text, a bounded number.
type Compiler struct {
	once     sync.Once
	env      *cel.Env
	envErr   error
	mu       sync.Mutex
	programs *lru.Cache
}

// compiledKept bounds the programs a Compiler keeps: far more than the distinct
// expressions of a fleet's syncs.
const compiledKept = 512

func (c *Compiler) environment() (*cel.Env, error) {
	c.once.Do(func() {
		opts := []cel.EnvOption{cel.OptionalTypes(), ext.Strings(), ext.Lists(), cel.CrossTypeNumericComparisons(true)}
		for _, name := range variables {
			opts = append(opts, cel.Variable(name, cel.DynType))
		}
		c.env, c.envErr = cel.NewEnv(opts...)
		c.programs = lru.New(compiledKept)
	})
	return c.env, c.envErr
}

// program compiles expr, which must return a bool.
func (c *Compiler) program(expr string) (cel.Program, error) {
	env, err := c.environment()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	c.mu.Lock()
	known, ok := c.programs.Get(expr)
	c.mu.Unlock()
	if ok {
		return known.(cel.Program), nil
	}
	ast, issues := env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, issues.Err()
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fmt.Errorf("returns %s, not a bool", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.InterruptCheckFrequency(100), cel.CostLimit(costLimit))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.programs.Add(expr, prg)
	c.mu.Unlock()
	return prg, nil
}

// costLimit bounds one evaluation: an expression over a large status cannot hold a
// worker.
const costLimit = 1_000_000

// Checks are a bundle's health checks, compiled, by kind.
type Checks struct {
	byKind map[schema.GroupVersionKind]check
}

type check struct {
	exprs []expression // inProgress, failed, current: the order they are asked in
}

type expression struct {
	field, text string
	status      status.Status
	program     cel.Program
}

// Compile compiles checks; its error names the check and the expression that does not
// compile, and why.
func (c *Compiler) Compile(checks []vidrav1alpha1.HealthCheck) (*Checks, error) {
	out := &Checks{byKind: map[schema.GroupVersionKind]check{}}
	for i, hc := range checks {
		gv, err := schema.ParseGroupVersion(hc.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("healthCheckExprs[%d].apiVersion %q: %w", i, hc.APIVersion, err)
		}
		var ch check
		for _, e := range []expression{
			{field: "inProgress", text: hc.InProgress, status: status.InProgressStatus},
			{field: "failed", text: hc.Failed, status: status.FailedStatus},
			{field: "current", text: hc.Current, status: status.CurrentStatus},
		} {
			if e.text == "" {
				continue
			}
			if e.program, err = c.program(e.text); err != nil {
				return nil, fmt.Errorf("healthCheckExprs[%d].%s (%s %s) %q: %w", i, e.field, hc.Kind, hc.APIVersion, e.text, err)
			}
			ch.exprs = append(ch.exprs, e)
		}
		out.byKind[gv.WithKind(hc.Kind)] = ch
	}
	return out, nil
}

// Compute tells u's health by the check of its kind; ok is false when none names it
// (kstatus tells then). An expression that cannot be evaluated (a field the object does
// not have yet, as often while it starts) leaves it in progress, saying which and why.
func (cs *Checks) Compute(u *unstructured.Unstructured) (result *status.Result, ok bool) {
	if cs == nil {
		return nil, false
	}
	ch, ok := cs.byKind[u.GroupVersionKind()]
	if !ok {
		return nil, false
	}
	obj := u.UnstructuredContent()
	if observed, found, _ := unstructured.NestedInt64(obj, "status", "observedGeneration"); found && observed != u.GetGeneration() {
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("status.observedGeneration %d, metadata.generation %d", observed, u.GetGeneration())}, true
	}
	vars := make(map[string]any, len(variables))
	for _, name := range variables {
		vars[name] = obj[name] // nil for a field it does not have: has() and ?. tell
	}
	for _, e := range ch.exprs {
		out, _, err := e.program.Eval(vars)
		if err != nil {
			return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("healthCheckExprs %s %q: %v", e.field, e.text, err)}, true
		}
		matched, isBool := out.Value().(bool)
		if !isBool {
			return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("healthCheckExprs %s %q returns %T, not a bool", e.field, e.text, out.Value())}, true
		}
		if matched {
			return &status.Result{Status: e.status, Message: fmt.Sprintf("healthCheckExprs %s %q is true", e.field, e.text)}, true
		}
	}
	return &status.Result{Status: status.InProgressStatus, Message: "no healthCheckExprs expression is true yet"}, true
}
