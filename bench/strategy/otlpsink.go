package main

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// otlpSink is an OTLP/HTTP trace receiver that keeps nothing: the traced
// rows' apis export their spans to it, so they pay what exporting costs
// (batching, protobuf, a POST) as they would to a real collector, and the
// run needs none.
type otlpSink struct {
	net.Listener
	requests, bytes atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{Listener: l}
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: all accepted
	}))
	return s, nil
}
