package notification

import (
	"fmt"
	"regexp"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Matcher tells which events an Alert sends.
type Matcher struct {
	alert            *vidrav1alpha1.Alert
	include, exclude []*regexp.Regexp
}

// NewMatcher compiles alert's lists; its error names the expression that does not
// compile.
func NewMatcher(alert *vidrav1alpha1.Alert) (*Matcher, error) {
	m := &Matcher{alert: alert}
	var err error
	if m.include, err = compile("inclusionList", alert.Spec.InclusionList); err != nil {
		return nil, err
	}
	if m.exclude, err = compile("exclusionList", alert.Spec.ExclusionList); err != nil {
		return nil, err
	}
	return m, nil
}

func compile(field string, exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	for i, expr := range exprs {
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("spec.%s[%d] %q is not a regular expression: %w", field, i, expr, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Matches says whether the Alert sends event, about an object labeled labels.
func (m *Matcher) Matches(event *eventv1.Event, labels map[string]string) bool {
	spec := m.alert.Spec
	if spec.EventSeverity == vidrav1alpha1.EventSeverityError && event.Severity != eventv1.EventSeverityError {
		return false
	}
	if !m.selects(event, labels) {
		return false
	}
	if len(m.include) > 0 && !anyMatch(m.include, event.Message) {
		return false
	}
	return !anyMatch(m.exclude, event.Message)
}

// selects says whether an event source selects the event's object.
func (m *Matcher) selects(event *eventv1.Event, labels map[string]string) bool {
	for _, src := range m.alert.Spec.EventSources {
		if src.Kind != event.InvolvedObject.Kind {
			continue
		}
		if src.Name != "" && src.Name != "*" && src.Name != event.InvolvedObject.Name {
			continue
		}
		if hasAll(labels, src.MatchLabels) {
			return true
		}
	}
	return false
}

func hasAll(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
