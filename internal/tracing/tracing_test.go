package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/flashsale/flashsale/internal/tracing"
)

// A sampled span's context goes out as a traceparent and comes back as a
// link to the same span; no span, or one not sampled, goes out as "" (the
// cost of tracing off: one check).
func TestCarrierAndLink_roundTrip(t *testing.T) {
	if got := tracing.Carrier(context.Background()); got != "" {
		t.Fatalf("no span: %q", got)
	}
	if _, ok := tracing.Link(""); ok {
		t.Fatal("a link from nothing")
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "request")
	defer span.End()
	tpHeader := tracing.Carrier(ctx)
	l, ok := tracing.Link(tpHeader)
	if !ok || l.SpanContext.SpanID() != span.SpanContext().SpanID() || l.SpanContext.TraceID() != span.SpanContext().TraceID() {
		t.Fatalf("Link(%q) = %v, %v; want the span %v", tpHeader, l.SpanContext, ok, span.SpanContext())
	}
	off := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	ctx, unsampled := off.Tracer("t").Start(context.Background(), "request")
	defer unsampled.End()
	if got := tracing.Carrier(ctx); got != "" {
		t.Fatalf("an unsampled span went out as %q", got)
	}
	if _, ok := tracing.Link("00-garbage"); ok {
		t.Fatal("a link from garbage")
	}
}

// Without an OTLP endpoint in the environment tracing is off: a no-op
// provider, whose spans record nothing.
func TestFromEnv_offUnlessAnEndpointIsNamed(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tp, on, shutdown, err := tracing.FromEnv(context.Background(), "flashsale-test")
	if err != nil || on {
		t.Fatalf("FromEnv: on %v, %v", on, err)
	}
	_, span := tp.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() {
		t.Fatal("tracing off, yet a span records")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	tp, on, shutdown, err = tracing.FromEnv(context.Background(), "flashsale-test")
	if err != nil || !on {
		t.Fatalf("with an endpoint: on %v, %v", on, err)
	}
	_, span = tp.Tracer("t").Start(context.Background(), "x")
	if !span.IsRecording() {
		t.Fatal("tracing on, yet the span does not record")
	}
	span.End()
	_ = shutdown(context.Background()) // nothing listens there: the export fails, the shutdown returns
}

// What tracing off adds to an order (the accept's span on a no-op tracer,
// the check for a trace context to carry into its task): go test -run '^$'
// -bench TracingOff ./internal/tracing.
func BenchmarkTracingOff_perOrder(b *testing.B) {
	tr := noop.NewTracerProvider().Tracer("flashsale/order")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, span := tr.Start(ctx, "order.accept")
		if span.IsRecording() {
			span.End()
		}
		if tracing.Carrier(c) != "" {
			b.Fatal("a trace context with tracing off")
		}
	}
}
