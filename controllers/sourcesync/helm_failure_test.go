package sourcesync

import (
	"errors"
	"testing"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/source/helmrender"
	"github.com/vidra-operator/vidra/internal/source/helmsource"
)

// What a rendering's failure does to its HelmSync: how it shows, and how long its build
// is not tried again.
func TestARenderingsFailureStandsAsLongAsItsCause(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	k := &Kind{Now: func() time.Time { return now }}
	for _, tc := range []struct {
		name    string
		err     error
		reason  string
		stalled bool
		// kept is whether the failed build is remembered, until when (zero: for good).
		kept  bool
		until time.Time
	}{
		{"over the memory bound: for good", &helmrender.LimitError{Chart: "c 1", Bound: helmrender.BoundMemory, Max: "256 MiB"},
			vidrav1alpha1.ReasonLimitExceeded, true, true, time.Time{}},
		{"over the time bound: a while, a loaded machine may pass", &helmrender.LimitError{Chart: "c 1", Bound: helmrender.BoundTime, Max: "30s"},
			vidrav1alpha1.ReasonLimitExceeded, false, true, now.Add(renderTimeoutFor)},
		{"over the bundle's bound: for good", &helmsource.LimitError{What: "the rendering of c 1", Limit: "MaxBundleBytes", Max: 10},
			vidrav1alpha1.ReasonLimitExceeded, true, true, time.Time{}},
		{"the process failed: not at all", &helmrender.ProcessError{Chart: "c 1", Err: errors.New("signal: killed")},
			vidrav1alpha1.ReasonBuildFailed, false, false, time.Time{}},
		{"the template failed: for good", errors.New("template: c/templates/x.yaml:1: no"),
			vidrav1alpha1.ReasonBuildFailed, false, true, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderFailure(helmsource.Version{Chart: "c", Version: "1"}, helmsource.Rendered{}, tc.err)
			var f *syncs.Failure
			if !errors.As(err, &f) || f.Reason != tc.reason || f.Stalled != tc.stalled {
				t.Fatalf("renderFailure(%v) = %#v, want reason %s, stalled %v", tc.err, err, tc.reason, tc.stalled)
			}
			got, kept := k.remembered(err)
			if kept != tc.kept || !got.until.Equal(tc.until) {
				t.Errorf("remembered: %v until %v, want %v until %v", kept, got.until, tc.kept, tc.until)
			}
		})
	}
}
