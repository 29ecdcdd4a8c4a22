package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is an HTTP server that is listening from the moment it is returned,
// so a port conflict is reported at start-up, not in a goroutine.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen binds addr and starts serving h.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       15 * time.Second,
			WriteTimeout:      15 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln: ln,
	}
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "addr", s.Addr(), "err", err)
		}
	}()
	return s, nil
}

// OnShutdown registers f to run when Shutdown begins: what ends the
// responses that would not end by themselves (the event streams' hub).
func (s *Server) OnShutdown(f func()) { s.srv.RegisterOnShutdown(f) }

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// then closes the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		_ = s.srv.Close()
	}
	return err
}
