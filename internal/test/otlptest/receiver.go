// Package otlptest is an OTLP/HTTP trace receiver for tests: it decodes the protobuf
// export requests the OpenTelemetry SDK sends, as a collector would, and keeps the spans.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is what a test looks at of a received span.
type Span struct {
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	Service      string
	Attributes   map[string]string
}

// Receiver receives OTLP/HTTP trace exports on URL()/v1/traces.
type Receiver struct {
	server *httptest.Server
	mu     sync.Mutex
	spans  []Span
}

// New starts a receiver; Close stops it.
func New() *Receiver {
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", r.export)
	r.server = httptest.NewServer(mux)
	return r
}

// URL is the receiver's base URL, an OTLP/HTTP endpoint.
func (r *Receiver) URL() string { return r.server.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.server.Close() }

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer func() { _ = gz.Close() }()
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &export); err != nil {
		http.Error(w, "not an OTLP trace export: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Service: service, Attributes: attributes(s.GetAttributes()),
				})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attributes flattens OTLP attributes to strings: ints and bools as Go prints them,
// arrays of strings joined by commas.
func attributes(kvs []*commonv1.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonv1.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonv1.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonv1.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		case *commonv1.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.ArrayValue.GetValues() {
				parts = append(parts, e.GetStringValue())
			}
			out[kv.GetKey()] = strings.Join(parts, ",")
		default:
			out[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return out
}
