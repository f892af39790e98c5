package infrahubsync

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// startSpan starts the reconcile's span, as a child of the trace context a webhook left on
// the InfrahubSync when this process has not joined it yet.
func (r *Reconciler) startSpan(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) (context.Context, trace.Span) {
	ctx = tracing.JoinRequest(ctx, ihs, vidrav1alpha1.RequestedAtAnnotation, ihs.Status.LastSyncTime, &r.traced)
	return tracing.Tracer().Start(ctx, "infrahubsync.reconcile", trace.WithAttributes(
		attribute.String("vidra.infrahubsync", ihs.Name), attribute.Int64("vidra.generation", ihs.Generation)))
}
