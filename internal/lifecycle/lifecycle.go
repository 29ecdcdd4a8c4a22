// Package lifecycle runs a binary's program from start to graceful shutdown.
package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Program is a binary's Main: Run wires and starts it and returns once it is
// serving; Close stops it gracefully.
type Program interface {
	Run(ctx context.Context) error
	Close() error
	Log() *slog.Logger
}

// Main runs p until SIGINT or SIGTERM, then closes it. It exits the process
// with status 1 if p fails to start or to close cleanly.
func Main(name string, p Program) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := p.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		_ = p.Close()
		os.Exit(1)
	}
	<-ctx.Done()
	stop() // a second signal kills the process the default way
	p.Log().Info("shutting down")
	if err := p.Close(); err != nil {
		p.Log().Error("shutdown", "err", err)
		os.Exit(1)
	}
}
