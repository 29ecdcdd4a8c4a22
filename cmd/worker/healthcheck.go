package main

// This file mirrors cmd/api/healthcheck.go (two main packages cannot share
// code without a library package); only the listen address differs.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/config"
)

// probeTimeout bounds one health check: connecting, sending, and reading the
// answer's status line and up to probeBodyMax bytes of its body.
const (
	probeTimeout = 2 * time.Second
	probeBodyMax = 512
)

// errUnhealthy marks every failure of `worker healthcheck`: main exits with
// status 1 for it (a container engine's "unhealthy"; 2 is reserved there).
var errUnhealthy = errors.New("unhealthy")

// exitCode is the process status for an error returned by command.
func exitCode(err error) int {
	if errors.Is(err, errUnhealthy) {
		return 1
	}
	return 2
}

// healthcheck is `worker healthcheck [--url URL]`, the container health check:
// the image is distroless (no shell, no curl), so the binary probes itself.
// It GETs /healthz on the address the worker serves (WORKER_HTTP_ADDR; a listen
// address without a host, or 0.0.0.0 or ::, is probed on 127.0.0.1) and
// succeeds only on 200; anything else, printed, is errUnhealthy.
func healthcheck(args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	url := fs.String("url", "", "the URL to GET (default: /healthz on WORKER_HTTP_ADDR)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUnhealthy, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q\n%s", errUnhealthy, fs.Args(), usage)
	}
	if *url == "" {
		cfg, err := config.Load()
		if err != nil {
			return fmt.Errorf("%w: %v", errUnhealthy, err)
		}
		if *url, err = healthURL(cfg.WorkerHTTPAddr); err != nil {
			return fmt.Errorf("%w: WORKER_HTTP_ADDR: %v", errUnhealthy, err)
		}
	}
	if err := probe(*url); err != nil {
		return fmt.Errorf("%w: %v", errUnhealthy, err)
	}
	fmt.Printf("healthy: GET %s: 200 OK\n", *url)
	return nil
}

// healthURL is the /healthz URL of a server listening on listen (host:port).
func healthURL(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("%q has no fixed port; give --url", listen)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1" // listening on every address, loopback included
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// probe GETs url and returns nil only for a 200 answer within probeTimeout.
// It uses no proxy and follows no redirect: it checks this server, nothing
// else.
func probe(url string) error {
	client := &http.Client{
		Timeout:   probeTimeout,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := client.Get(url)
	if err != nil {
		return err // names the method, the URL and the cause (refused, timeout, …)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, probeBodyMax))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
