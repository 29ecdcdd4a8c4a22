package app

import (
	"context"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale/internal/tracing"
)

// traces is a program's tracing: off (a no-op provider, nothing
// instrumented) unless the environment names an OTLP endpoint
// (internal/tracing) or the program was given a provider (a test's
// in-memory one).
type traces struct {
	tp       trace.TracerProvider
	on       bool
	shutdown func(context.Context) error
}

func openTraces(ctx context.Context, given trace.TracerProvider, service string) (traces, error) {
	if given != nil {
		return traces{tp: given, on: true, shutdown: func(context.Context) error { return nil }}, nil
	}
	tp, on, shutdown, err := tracing.FromEnv(ctx, service)
	return traces{tp: tp, on: on, shutdown: shutdown}, err
}

func (t traces) tracer(name string) trace.Tracer { return t.tp.Tracer(name) }

// middleware is the HTTP requests' spans (otelgin: one per request, named
// by its route, continuing a caller's traceparent), nil when off.
func (t traces) middleware(service string) gin.HandlerFunc {
	if !t.on {
		return nil
	}
	return otelgin.Middleware(service, otelgin.WithTracerProvider(t.tp), otelgin.WithPropagators(tracing.Propagator))
}
