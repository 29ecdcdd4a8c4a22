package demo

import (
	"os/exec"
	"testing"
	"time"
)

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
