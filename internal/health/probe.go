package health

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// ProbeTimeout bounds one health check: connecting, sending, and reading the
// answer's status line and up to probeBodyMax bytes of its body.
const (
	ProbeTimeout = 2 * time.Second
	probeBodyMax = 512
)

// ErrUnhealthy marks every failure of a `healthcheck` command: the binaries
// exit with status 1 for it (a container engine's "unhealthy"; 2 is
// reserved there).
var ErrUnhealthy = errors.New("unhealthy")

// ExitCode is the process status for an error of a binary's command: 1 for
// ErrUnhealthy, else 2 (usage and other errors).
func ExitCode(err error) int {
	if errors.Is(err, ErrUnhealthy) {
		return 1
	}
	return 2
}

// Command is `api|worker healthcheck [--url URL]`, the container health
// check: the image is distroless (no shell, no curl), so the binary probes
// itself. Without --url it GETs /healthz on the address the program listens
// on, which listen reads from the configuration (setting names it in
// errors; a listen address without a host, or 0.0.0.0 or ::, is probed on
// 127.0.0.1). It succeeds only on 200; anything else, printed, is
// ErrUnhealthy.
func Command(args []string, setting, usage string, listen func() (string, error)) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	url := fs.String("url", "", "the URL to GET (default: /healthz on "+setting+")")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUnhealthy, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q\n%s", ErrUnhealthy, fs.Args(), usage)
	}
	if *url == "" {
		addr, err := listen()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnhealthy, err)
		}
		if *url, err = URL(addr); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUnhealthy, setting, err)
		}
	}
	if err := Probe(*url); err != nil {
		return fmt.Errorf("%w: %v", ErrUnhealthy, err)
	}
	fmt.Printf("healthy: GET %s: 200 OK\n", *url)
	return nil
}

// URL is the /healthz URL of a server listening on listen (host:port).
func URL(listen string) (string, error) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("%q has no fixed port; give --url", listen)
	}
	return "http://" + LocalAddr(listen) + "/healthz", nil
}

// LocalAddr is addr (a listener's address) as a local client dials it: an
// unspecified host (":8080", "0.0.0.0:8080", "[::]:8080"), listening on
// every address, loopback included, becomes 127.0.0.1.
func LocalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Probe GETs url and returns nil only for a 200 answer within ProbeTimeout.
// It uses no proxy and follows no redirect: it checks this server, nothing
// else.
func Probe(url string) error {
	client := &http.Client{
		Timeout:   ProbeTimeout,
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
