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

// Checker finds which required policies are not in force.
type Checker struct {
	// Reader reads the policies and their bindings (the hub's cache).
	Reader client.Reader
	// Required are the policies that must be in force.
	Required []Policy
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
// Empty when all are in force.
func (c *Checker) Missing(ctx context.Context) ([]string, error) {
	var missing []string
	for _, p := range c.Required {
		why, err := c.missing(ctx, p)
		if err != nil {
			return nil, err
		}
		if why != "" {
			missing = append(missing, why)
		}
	}
	return missing, nil
}

func (c *Checker) missing(ctx context.Context, p Policy) (string, error) {
	var policy client.Object = &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if p.Kind == Mutating {
		policy = &admissionregistrationv1.MutatingAdmissionPolicy{}
	}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: p.Name}, policy); apierrors.IsNotFound(err) {
		return p.String() + " is not installed", nil
	} else if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	bound, err := c.bound(ctx, p)
	if err != nil || bound {
		return "", err
	}
	if p.Kind == Validating {
		return p.String() + " has no binding that denies what it refuses", nil
	}
	return p.String() + " has no binding", nil
}

// bound says whether a binding puts the policy in force.
func (c *Checker) bound(ctx context.Context, p Policy) (bool, error) {
	if p.Kind == Mutating {
		var list admissionregistrationv1.MutatingAdmissionPolicyBindingList
		if err := c.Reader.List(ctx, &list); err != nil {
			return false, fmt.Errorf("list MutatingAdmissionPolicyBindings: %w", err)
		}
		return slices.ContainsFunc(list.Items, func(b admissionregistrationv1.MutatingAdmissionPolicyBinding) bool {
			return b.Spec.PolicyName == p.Name
		}), nil
	}
	var list admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := c.Reader.List(ctx, &list); err != nil {
		return false, fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
	}
	return slices.ContainsFunc(list.Items, func(b admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool {
		return b.Spec.PolicyName == p.Name && slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny)
	}), nil
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
