// Package tracing sets up OpenTelemetry traces for a process, off unless
// configured, and carries a trace's context through the places the
// service hands work on: from a request to the asynq task that persists
// its order (Carrier, Link).
//
// On: OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// names an OTLP/HTTP collector; the SDK reads the rest of OpenTelemetry's
// standard variables itself (OTEL_TRACES_SAMPLER and _ARG, default
// parentbased_always_on; OTEL_SERVICE_NAME; OTEL_EXPORTER_OTLP_HEADERS…).
// Off, every tracer is a no-op and nothing is instrumented.
package tracing

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Enabled reports whether the environment asks for traces.
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns the process's tracer provider: an OTLP/HTTP exporter's
// when Enabled, else a no-op one (on reports which). shutdown flushes the
// spans still buffered.
func FromEnv(ctx context.Context, service string) (tp trace.TracerProvider, on bool, shutdown func(context.Context) error, err error) {
	if !Enabled() {
		return noop.NewTracerProvider(), false, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, false, nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, false, nil, fmt.Errorf("tracing: resource: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, true, p.Shutdown, nil
}

// Propagator is how a trace's context travels: W3C Trace Context, in HTTP
// headers (traceparent) and in task payloads.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Carrier returns ctx's trace context as a traceparent string, "" when ctx
// carries no sampled span (tracing off costs one check).
func Carrier(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	return c["traceparent"]
}

// Link is a link to the span a Carrier string names (false if it names
// none): a task that handles many orders links to each order's request.
func Link(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	return trace.Link{SpanContext: sc}, sc.IsValid()
}
