// Package admissionguard says whether the hub's admission policies that record and check
// who asked for a delivery are in force. The operator trusts a VidraResource's
// requested-by stamp, and the absence of one, only while they are: a policy or binding
// deleted by mistake, or never installed, must not let a bundle through unchecked.
package admissionguard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind is the kind of an admission policy.
type Kind string

// The kinds of admission policy a guard may require.
const (
	Validating Kind = "ValidatingAdmissionPolicy"
	Mutating   Kind = "MutatingAdmissionPolicy"
)

// Policy names one required admission policy.
type Policy struct {
	Kind Kind
	Name string
}

func (p Policy) String() string { return string(p.Kind) + " " + p.Name }

// Parse reads a list of policies as the operator's flag spells it:
// "validating/NAME,mutating/NAME".
func Parse(list string) ([]Policy, error) {
	var out []Policy
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, name, ok := strings.Cut(item, "/")
		if !ok || name == "" {
			return nil, fmt.Errorf("admission policy %q: want validating/NAME or mutating/NAME", item)
		}
		switch strings.ToLower(kind) {
		case "validating":
			out = append(out, Policy{Kind: Validating, Name: name})
		case "mutating":
			out = append(out, Policy{Kind: Mutating, Name: name})
		default:
			return nil, fmt.Errorf("admission policy %q: kind %q is neither validating nor mutating", item, kind)
		}
	}
	return out, nil
}

// Checker finds which required policies are not in force, and remembers when they were
// not (see RecordRefusal).
type Checker struct {
	// Reader reads the policies and their bindings (the hub's cache).
	Reader client.Reader
	// Required are the policies that must be in force.
	Required []Policy
	// Store, when set, keeps the record of when they were not in force across restarts:
	// read at the first check, written by Recorder.
	Store *GapStore

	mu     sync.Mutex
	log    *gapLog
	seeded bool
}

// Retry is how soon something refused for want of the policies is looked at again.
const Retry = time.Minute

// Refusal says why what (a phrase such as "this InfrahubSync was written by a person")
// waits: the policies not in force, or that whether they are cannot be checked (fail
// closed). Empty when every one is in force, or c is nil (none is required).
func (c *Checker) Refusal(ctx context.Context, what string) string {
	if c == nil {
		return ""
	}
	missing, err := c.Missing(ctx)
	switch {
	case err != nil:
		return "whether the hub's admission policies are in force cannot be checked yet, so nothing is delivered: " + err.Error()
	case len(missing) == 0:
		return ""
	}
	return fmt.Sprintf("the hub's admission policies that record and check who asks for a delivery are not all in force (%s), "+
		"and %s: it is not delivered until they are (reinstall the chart, or ask an admin)", strings.Join(missing, "; "), what)
}

// Missing says, for each required policy not in force, what is missing: the policy, or a
// binding that enforces it (for a validating policy, one whose actions include Deny).
// Empty when all are in force. Each look is noted, to tell when those that record who
// asks were not (see recording).
func (c *Checker) Missing(ctx context.Context) ([]string, error) {
	log, err := c.gaps(ctx)
	if err != nil {
		return nil, err
	}
	var missing, identity []string
	recording, recorded := c.recording(), true
	for _, p := range c.Required {
		why, ids, err := c.missing(ctx, p)
		if err != nil {
			return nil, err
		}
		if why != "" {
			missing = append(missing, why)
		}
		if p.Kind == recording {
			recorded = recorded && why == ""
			identity = append(identity, ids...)
		}
	}
	log.observe(recorded, identity, time.Now())
	return missing, nil
}

// recording is the kind of the policies that record who asks: the requester policy
// (mutating) that stamps every change of a spec; where the API server serves none, the
// deliver policy (validating) that refuses a stamp naming anyone but the writer. While
// the deliver policy alone is missing, stamps are still true, and the operator asks
// again whether whoever they name may deliver.
func (c *Checker) recording() Kind {
	if slices.ContainsFunc(c.Required, func(p Policy) bool { return p.Kind == Mutating }) {
		return Mutating
	}
	return Validating
}

// missing says what of p is missing, and what puts it in force: the policy's UID, and
// each enforcing binding's UID and generation (a binding changed and changed back while
// no one looked is told apart).
func (c *Checker) missing(ctx context.Context, p Policy) (string, []string, error) {
	var policy client.Object = &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if p.Kind == Mutating {
		policy = &admissionregistrationv1.MutatingAdmissionPolicy{}
	}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: p.Name}, policy); apierrors.IsNotFound(err) {
		return p.String() + " is not installed", nil, nil
	} else if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", p, err)
	}
	bindings, err := c.bindings(ctx, p)
	if err != nil {
		return "", nil, err
	}
	switch {
	case len(bindings) > 0:
		return "", append([]string{string(policy.GetUID())}, bindings...), nil
	case p.Kind == Validating:
		return p.String() + " has no binding that denies what it refuses", nil, nil
	}
	return p.String() + " has no binding", nil, nil
}

// bindings are the bindings that put p in force, each as its UID and generation.
func (c *Checker) bindings(ctx context.Context, p Policy) ([]string, error) {
	var out []string
	enforcing := func(b client.Object) {
		out = append(out, fmt.Sprintf("%s/%d", b.GetUID(), b.GetGeneration()))
	}
	if p.Kind == Mutating {
		var list admissionregistrationv1.MutatingAdmissionPolicyBindingList
		if err := c.Reader.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("list MutatingAdmissionPolicyBindings: %w", err)
		}
		for i, b := range list.Items {
			if b.Spec.PolicyName == p.Name {
				enforcing(&list.Items[i])
			}
		}
		return sorted(out), nil
	}
	var list admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := c.Reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
	}
	for i, b := range list.Items {
		if b.Spec.PolicyName == p.Name && slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) {
			enforcing(&list.Items[i])
		}
	}
	return sorted(out), nil
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// RecordsRequester says whether admission records who asks: a MutatingAdmissionPolicy
// is among the required policies (the chart installs the requester policy only where the
// API server serves them, Kubernetes 1.36 on). Where it is not, a requested-by stamp is
// written, or left out, by the requester itself: the deliver policy refuses one naming
// anyone else, but an object without one may be anyone's. True for a nil c: nothing is
// required, and stamps are taken as written.
func (c *Checker) RecordsRequester() bool {
	return c == nil || slices.ContainsFunc(c.Required, func(p Policy) bool { return p.Kind == Mutating })
}

// Objects are an object of each kind the required policies involve (policies and their
// bindings), for a controller to watch; none for a nil Checker.
func (c *Checker) Objects() []client.Object {
	if c == nil {
		return nil
	}
	var out []client.Object
	kinds := map[Kind]bool{}
	for _, p := range c.Required {
		kinds[p.Kind] = true
	}
	if kinds[Validating] {
		out = append(out, &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
	}
	if kinds[Mutating] {
		out = append(out, &admissionregistrationv1.MutatingAdmissionPolicy{}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{})
	}
	return out
}
