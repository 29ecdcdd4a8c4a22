package app_test

import (
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// One order followed end to end on a real api and worker (in-process, on
// real Redis and MariaDB), its spans in the SDK's in-memory exporter: the
// request's span continues the client's traceparent; the accept (the
// Redis script) is its child and names the order; the worker's sync task,
// which carries the order's trace context in its payload, has a span
// linked to the order's, and the MySQL write is that span's child.
func TestTracing_oneOrder_fromItsRequestToItsMySQLWrite(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s := startStack(t, "", nil, nil, tp)
	s.worker()
	act := s.sale(10, 1, 60)

	clientTrace := "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan := "00f067aa0ba902b7"
	r := s.order(1, act, 1, "traceparent", fmt.Sprintf("00-%s-%s-01", clientTrace, clientSpan))
	if r.code != 202 {
		t.Fatalf("order: %d %v", r.code, r.body)
	}
	no := r.body["order_no"].(string)
	s.waitPersisted(act, 1, 10*time.Second)

	var spans tracetest.SpanStubs
	var server, accept, sync, write *tracetest.SpanStub
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		spans = exp.GetSpans()
		server, accept, sync, write = nil, nil, nil, nil
		for i := range spans {
			sp := &spans[i]
			switch {
			case sp.Name == "POST /v1/activities/:id/orders" || sp.Name == "/v1/activities/:id/orders":
				server = sp
			case sp.Name == "order.accept":
				accept = sp
			case sp.Name == "order.sync-batch" || sp.Name == "order.sync":
				for _, l := range sp.Links {
					if l.SpanContext.TraceID().String() == clientTrace {
						sync = sp
					}
				}
			}
		}
		if sync != nil {
			for i := range spans {
				if spans[i].Name == "mysql.write-orders" && spans[i].Parent.SpanID() == sync.SpanContext.SpanID() {
					write = &spans[i]
				}
			}
		}
		if server != nil && accept != nil && sync != nil && write != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var names []string
	for _, sp := range spans {
		names = append(names, sp.Name)
	}
	if server == nil || accept == nil || sync == nil || write == nil {
		t.Fatalf("spans %v: server %v, accept %v, sync linked to the order %v, its MySQL write %v",
			names, server != nil, accept != nil, sync != nil, write != nil)
	}
	if server.SpanContext.TraceID().String() != clientTrace || server.Parent.SpanID().String() != clientSpan {
		t.Errorf("the request's span is in trace %s under %s: want the client's traceparent continued",
			server.SpanContext.TraceID(), server.Parent.SpanID())
	}
	if accept.Parent.SpanID() != server.SpanContext.SpanID() || accept.SpanContext.TraceID().String() != clientTrace {
		t.Errorf("order.accept is not the request span's child")
	}
	if got := attr(accept, "flashsale.order"); got != no {
		t.Errorf("order.accept names order %q, want %s", got, no)
	}
	if a, q := attr(accept, "flashsale.activity"), attr(accept, "flashsale.quantity"); a != fmt.Sprint(act) || q != "1" {
		t.Errorf("order.accept names activity %q and quantity %q, want %d and 1", a, q, act)
	}
	if sync.SpanContext.TraceID().String() == clientTrace {
		t.Errorf("the sync task's span is in the order's trace: want a trace of its own, linked (it serves a batch)")
	}
	if write.EndTime.Before(write.StartTime) || write.StartTime.Before(server.StartTime) {
		t.Errorf("the MySQL write's span %v–%v, the request's %v", write.StartTime, write.EndTime, server.StartTime)
	}
}

func attr(sp *tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
