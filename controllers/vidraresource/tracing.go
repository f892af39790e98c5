package vidraresource

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
)

// startSpan starts the reconcile's span. The reconcile of a new generation joins the
// trace of the change that wrote it (the InfrahubSync's, carried on the VidraResource);
// a resync or a drift repair is a trace of its own.
func startSpan(ctx context.Context, vr *vidrav1alpha1.VidraResource) (context.Context, trace.Span) {
	if vr.Generation != vr.Status.ObservedGeneration {
		ctx = tracing.Extract(ctx, vr)
	}
	cluster := vr.Status.Cluster
	switch {
	case cluster != "":
	case vr.Spec.Destination.Cluster != "":
		cluster = vr.Spec.Destination.Cluster
	case vr.Spec.Destination.Server != "":
		cluster = vr.Spec.Destination.Server
	default:
		cluster = "local"
	}
	return tracing.Tracer().Start(ctx, "vidraresource.reconcile", trace.WithAttributes(
		attribute.String("vidra.vidraresource", vr.Name), attribute.String("vidra.cluster", cluster),
		attribute.Int64("vidra.generation", vr.Generation)))
}

// traceResults counts what the apply and the release did on the reconcile's span.
func traceResults(ctx context.Context, results, released []apply.Result) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	counts := map[apply.Action]int{}
	for _, r := range append(append([]apply.Result(nil), results...), released...) {
		counts[r.Action]++
	}
	span.SetAttributes(
		attribute.Int("vidra.objects", len(results)),
		attribute.Int("vidra.objects.created", counts[apply.Created]),
		attribute.Int("vidra.objects.updated", counts[apply.Configured]+counts[apply.Repaired]),
		attribute.Int("vidra.objects.unchanged", counts[apply.Unchanged]),
		attribute.Int("vidra.objects.pruned", counts[apply.Deleted]+counts[apply.Released]),
		attribute.Int("vidra.objects.failed", counts[apply.Failed]+counts[apply.Conflicted]),
	)
}
