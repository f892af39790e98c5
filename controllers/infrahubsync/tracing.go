package infrahubsync

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// startSpan starts the reconcile's span, as a child of the trace context a webhook left on
// the InfrahubSync when this process has not joined it yet.
func (r *Reconciler) startSpan(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) (context.Context, trace.Span) {
	// Joined once, and only while the request is newer than the last listing: after a
	// restart, an old webhook's trace is not joined again. lastSyncTime keeps whole
	// seconds, so the request is compared at that precision: one made in the second of
	// the last listing is taken as listed (its sync gets a trace of its own) rather than
	// risk joining a trace already synced.
	parent := ihs.Annotations[tracing.TraceparentAnnotation]
	requested, err := time.Parse(time.RFC3339Nano, ihs.Annotations[vidrav1alpha1.RequestedAtAnnotation])
	pending := err == nil && (ihs.Status.LastSyncTime == nil || requested.Truncate(time.Second).After(ihs.Status.LastSyncTime.Time))
	if last, _ := r.traced.Load(ihs.Name); parent != "" && pending && last != parent {
		r.traced.Store(ihs.Name, parent)
		ctx = tracing.Extract(ctx, ihs)
	} else {
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{}) // a trace of its own
	}
	return tracing.Tracer().Start(ctx, "infrahubsync.reconcile", trace.WithAttributes(
		attribute.String("vidra.infrahubsync", ihs.Name), attribute.Int64("vidra.generation", ihs.Generation)))
}
