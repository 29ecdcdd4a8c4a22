package demo

import (
	"os/exec"
	"testing"
	"time"
)

func TestLocalAddr_unspecifiedHostIsLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"[::]:8080":      "127.0.0.1:8080",
		"0.0.0.0:8080":   "127.0.0.1:8080",
		":8080":          "127.0.0.1:8080",
		"127.0.0.1:9000": "127.0.0.1:9000",
		"10.1.2.3:80":    "10.1.2.3:80",
		"[::1]:8080":     "[::1]:8080",
	} {
		if got := LocalAddr(in); got != want {
			t.Errorf("LocalAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// What the printed commands quote reaches bash's commands unchanged.
func TestShellQuote_roundTripsThroughBash(t *testing.T) {
	for _, s := range []string{"plain-token_1.2", "/tmp/flashsale-demo-1/tokens.txt", "with space", `it's "quoted" $HOME \ ;|&*`, ""} {
		out, err := exec.Command("bash", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("%q quoted as %s: bash printed %q (%v)", s, shellQuote(s), out, err)
		}
	}
	if q := shellQuote("abc123"); q != "abc123" {
		t.Errorf("a plain word is quoted: %s", q)
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{15 * time.Minute: "15 min", 24 * time.Hour: "24 h", 90 * time.Second: "1m30s"} {
		if got := human(d); got != want {
			t.Errorf("human(%v) = %q, want %q", d, got, want)
		}
	}
}
