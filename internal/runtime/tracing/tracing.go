// Package tracing is Vidra's OpenTelemetry tracing: one trace follows one change from an
// Infrahub webhook or listing, through the InfrahubSync's reconcile and each VidraResource
// it writes, to the apply on each cluster and the VM restarts it causes. The trace
// context goes from the sync to its VidraResources on the objects themselves (an
// annotation), so spans join across reconciles and replicas.
package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TraceparentAnnotation carries the W3C trace context of the change that wrote an object
// (traceparent; tracestate in TracestateAnnotation).
const (
	TraceparentAnnotation = "vidra.infrahub.operators.com/traceparent"
	TracestateAnnotation  = "vidra.infrahub.operators.com/tracestate"
)

// Tracer is Vidra's tracer. Until Setup installs a provider it is a no-op, as it stays
// when tracing is off.
func Tracer() trace.Tracer {
	return otel.Tracer("github.com/vidra-operator/vidra")
}

// Options say where spans go.
type Options struct {
	// Endpoint is an OTLP/HTTP endpoint URL (such as http://collector:4318); empty: the
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT environment
	// variable, and when neither is set, tracing is off.
	Endpoint string
}

// Enabled says whether Setup would export spans.
func (o Options) Enabled() bool {
	return o.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs an OTLP/HTTP exporter as the global tracer provider when tracing is
// enabled (the other OTEL_EXPORTER_OTLP_* variables — headers, timeout, certificates,
// protocol options — and OTEL_SERVICE_NAME apply as the OpenTelemetry SDK reads them). It
// returns the function that flushes and stops it; when tracing is off, a no-op.
func Setup(ctx context.Context, opts Options) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !opts.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	var exporterOpts []otlptracehttp.Option
	if opts.Endpoint != "" {
		endpoint, err := tracesURL(opts.Endpoint)
		if err != nil {
			return nil, err
		}
		exporterOpts = append(exporterOpts, otlptracehttp.WithEndpointURL(endpoint))
	}
	exporter, err := otlptracehttp.New(ctx, exporterOpts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("vidra")))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// OTEL_SERVICE_NAME, when set, names the service instead.
	if fromEnv, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, fromEnv); err == nil {
			res = merged
		}
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	return provider.Shutdown, nil
}

// tracesURL is the traces URL of an OTLP/HTTP base endpoint, as the SDK makes it of
// OTEL_EXPORTER_OTLP_ENDPOINT: /v1/traces appended to its path.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("--otlp-endpoint %q is not a URL such as http://otel-collector:4318", endpoint)
	}
	if !strings.HasSuffix(u.Path, "/v1/traces") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// annotationCarrier reads and writes the trace context in an object's annotations.
type annotationCarrier map[string]string

var carrierKeys = map[string]string{"traceparent": TraceparentAnnotation, "tracestate": TracestateAnnotation}

func (c annotationCarrier) Get(key string) string { return c[carrierKeys[key]] }

func (c annotationCarrier) Set(key, value string) {
	if a, ok := carrierKeys[key]; ok {
		c[a] = value
	}
}

func (c annotationCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Inject writes the trace context of ctx into the object's annotations. Without a span
// being recorded in ctx (tracing off, or not sampled) it writes nothing, so that objects
// get no annotation, and no write, for traces nobody keeps.
func Inject(ctx context.Context, obj client.Object) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, TracestateAnnotation)
	otel.GetTextMapPropagator().Inject(ctx, annotationCarrier(annotations))
	obj.SetAnnotations(annotations)
}

// AnnotationsPatch is a JSON merge patch setting annotations on an object, with ctx's
// trace context when ctx records a span: the request it makes is then traced as part of
// ctx's trace. Any trace context of an earlier request goes, so none is joined by mistake.
func AnnotationsPatch(ctx context.Context, annotations map[string]string) ([]byte, error) {
	patch := map[string]any{TraceparentAnnotation: nil, TracestateAnnotation: nil}
	for k, v := range annotations {
		patch[k] = v
	}
	carried := &metav1.PartialObjectMetadata{}
	Inject(ctx, carried)
	for k, v := range carried.Annotations {
		patch[k] = v
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
}

// Extract returns ctx with the trace context of the object's annotations as the remote
// parent, when it has one.
func Extract(ctx context.Context, obj client.Object) context.Context {
	annotations := obj.GetAnnotations()
	if annotations[TraceparentAnnotation] == "" {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, annotationCarrier(annotations))
}
