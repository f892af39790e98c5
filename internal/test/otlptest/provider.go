package otlptest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// UseProvider makes a tracer provider of opts, with W3C trace-context propagation, the
// process's own for the test (as main installs one), and puts back what was there after.
func UseProvider(t testing.TB, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	t.Helper()
	provider := sdktrace.NewTracerProvider(opts...)
	previous, previousPropagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		_ = provider.Shutdown(context.Background())
		otel.SetTracerProvider(previous)
		otel.SetTextMapPropagator(previousPropagator)
	})
	return provider
}
