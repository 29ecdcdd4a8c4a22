package demo

import (
	"os/exec"
	"strings"
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

// ab's "Failed requests … (Length …)" for the refusals is explained in the
// comment right above the ab command, where a newcomer reads ab's output.
func TestText_explainsAbsLengthFailuresAboveTheAbCommand(t *testing.T) {
	for _, userRPS := range []int{10, 0} {
		d := &Demo{cfg: Config{AdminToken: "adm", UserRPS: userRPS}, base: "http://127.0.0.1:8080", dir: "/tmp/flashsale-demo-x",
			tokens: []string{"t1", "t2", "t3"}}
		d.sale.ID, d.groupBuy.ID = 1, 2
		var comments []string
		for line := range strings.Lines(d.Text()) {
			if strings.HasPrefix(line, "ab ") {
				break
			}
			if strings.HasPrefix(line, "# ") {
				comments = append(comments, strings.TrimSpace(line))
			}
		}
		above := strings.Join(comments[len(comments)-3:], " ")
		for _, want := range []string{`"Failed requests: ... (Length: ...)"`, "not errors",
			"ab counts as failed every answer # whose length differs from the first answer's"} {
			if !strings.Contains(above, want) {
				t.Errorf("user limit %d: the lines above ab lack %q:\n%s", userRPS, want, above)
			}
		}
	}
}
