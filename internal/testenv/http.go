package testenv

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// WaitHTTP polls url until it answers (any status) or timeout passes.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	waitHTTP(t, url, timeout, nil)
}

// WaitHTTP polls url until it answers, failing at once if the child exits.
func (c *Child) WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	waitHTTP(t, url, timeout, c)
}

func waitHTTP(t testing.TB, url string, timeout time.Duration, c *Child) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if c != nil {
			select {
			case <-c.exited:
				t.Fatalf("testenv: child exited before %s answered: %v\n%s", url, c.err, c.Output())
			default:
			}
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: %s not answering after %v: %v", url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// GetJSON fetches url and decodes its JSON body into a map.
func GetJSON(t testing.TB, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("GET %s: status %d, body %q is not JSON: %v", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, body
}

// WaitReady polls url until it answers 200 or timeout passes; it fails the
// test with the last answer.
func WaitReady(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("testenv: %s still %d after %v: %s", url, resp.StatusCode, timeout, b)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("testenv: %s not answering after %v: %v", url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
