package tracing

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// JoinRequest returns ctx as the parent of a sync's reconcile: the trace a webhook left
// on the sync with its request (the annotation requestedAt names, and the trace context),
// else a trace of its own. A request is joined once per process (joined remembers it, by
// the sync's name), and only while it is newer than the sync's last look at its source
// (lastSync): after a restart an old webhook's trace is not joined again. lastSync keeps
// whole seconds, so the request is compared at that precision: one made in the second of
// the last look is taken as seen (its sync gets a trace of its own) rather than risk
// joining a trace already synced.
func JoinRequest(ctx context.Context, obj client.Object, requestedAt string, lastSync *metav1.Time, joined *sync.Map) context.Context {
	annotations := obj.GetAnnotations()
	parent := annotations[TraceparentAnnotation]
	requested, err := time.Parse(time.RFC3339Nano, annotations[requestedAt])
	pending := err == nil && (lastSync == nil || requested.Truncate(time.Second).After(lastSync.Time))
	if last, _ := joined.Load(obj.GetName()); parent != "" && pending && last != parent {
		joined.Store(obj.GetName(), parent)
		return Extract(ctx, obj)
	}
	return trace.ContextWithSpanContext(ctx, trace.SpanContext{})
}
