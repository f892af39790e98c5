package syncs

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/test/otlptest"
)

// A sync joins the trace of the request that asked for it only while that request is
// newer than the last listing, judged at lastSyncTime's precision (whole seconds): a
// request listed in the same second is not joined again after a restart.
func TestASyncJoinsOnlyATraceNotListedYet(t *testing.T) {
	otlptest.UseProvider(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	listed := metav1.NewTime(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)) // as stored: whole seconds
	for _, tc := range []struct {
		name      string
		requested time.Time
		joined    bool
	}{
		{"requested before the listing", listed.Add(-2 * time.Second), false},
		{"requested in the listing's second, synced in it", listed.Add(400 * time.Millisecond), false},
		{"requested after the listing's second", listed.Add(1200 * time.Millisecond), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ihs := &vidrav1alpha1.InfrahubSync{
				ObjectMeta: metav1.ObjectMeta{Name: "traced", Annotations: map[string]string{
					tracing.TraceparentAnnotation:       "00-" + traceID + "-00f067aa0ba902b7-01",
					vidrav1alpha1.RequestedAtAnnotation: tc.requested.Format(time.RFC3339Nano),
				}},
				Status: vidrav1alpha1.InfrahubSyncStatus{LastSyncTime: &listed},
			}
			r := &Reconciler{} // a process that joined nothing yet, as after a restart
			_, span := r.startSpan(context.Background(), ihs)
			span.End()
			if joined := span.SpanContext().TraceID().String() == traceID; joined != tc.joined {
				t.Errorf("joined the request's trace: %v, want %v", joined, tc.joined)
			}
		})
	}
}
