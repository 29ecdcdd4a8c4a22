package app_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The console's waiting room: a sale's live page shows its queue (joined,
// admitted, waiting, the rate set and measured, the last in line's wait),
// sets a new rate (PATCH admit_per_second: refused in the page when not a
// whole number of 1 or more), and a pause of the sale pauses admission
// (the wait then says so).
func TestConsole_waitingRoom_figures_rate_andPause(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	sale := s.roomSale(100, 1)
	var users []int64
	for u := int64(1); u <= 30; u++ {
		users = append(users, u)
	}
	s.joinQueue(sale, users...)
	b := newBrowser(t, chromium, s.base)
	b.openLive(sale)
	b.waitVisible("#queue-live")
	b.waitText("#queue-joined", is("30"))
	b.waitText("#queue-rate-set", is("1/s"))
	if n, err := strconv.Atoi(b.text("#queue-waiting")); err != nil || n < 20 || n > 30 {
		t.Fatalf("waiting %q at 1 a second of 30 joined just now", b.text("#queue-waiting"))
	}
	b.waitText("#queue-wait", func(s string) bool { return s != "—" && s != "" })

	b.fill("#admit-rate", "0")
	b.click("#admit-form button[type=submit]")
	b.waitText("#admit-message", contains("a whole number, 1 or more"))
	b.fill("#admit-rate", "5")
	b.click("#admit-form button[type=submit]")
	b.waitText("#admit-message", contains("Letting in 5 a second"))
	b.waitText("#queue-rate-set", is("5/s"))
	if r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d", sale), ""); r.code != 200 || r.body["admit_per_second"] != float64(5) {
		t.Fatalf("the sale after the console's rate: %d %v", r.code, r.body["admit_per_second"])
	}

	b.click("#live-pause")
	b.waitText("#queue-wait", is("paused"))
	b.click("#live-resume")
	b.waitText("#queue-wait", func(s string) bool { return s != "paused" })
}
