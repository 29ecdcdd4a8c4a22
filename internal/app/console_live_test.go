package app_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The newcomer's case: an order just accepted, which the worker has not
// written to MySQL yet, shows on the live page as pending persistence (not
// as a problem), and once a worker writes it, in sync.
func TestConsole_livePage_anOrderNotYetInMySQL_showsPendingPersistenceNotAProblem(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "") // no worker yet
	id := s.activity("Phone", 10)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		t.Fatalf("publish: %d %v", r.code, r.body)
	}
	b := newBrowser(t, chromium, s.base)
	b.openLive(id)
	b.waitText("#recon-state", is("in sync"))

	if r := s.order(1, id, 1); r.code != 202 {
		t.Fatalf("order: %d %v", r.code, r.body)
	}
	b.waitText("#stock-remaining", is("9"))
	b.waitText("#recon-state", is("pending persistence"))
	if st, pending, problems := b.attr("#recon-state", "data-status"), b.text("#recon-pending"), b.count("#recon-problems li"); st != "pending" ||
		pending != "1 order (+1 unit)" || problems != 0 {
		t.Fatalf("an order on its way shows as %q, pending %q, with %d problems", st, pending, problems)
	}

	s.worker()
	b.waitText("#recon-state", is("in sync"))
	if pending, persisted := b.text("#recon-pending"), b.text("#persisted-units"); pending != "none" || persisted != "1" {
		t.Fatalf("recorded: pending %q, units persisted %q", pending, persisted)
	}
}

// openLive signs in with the admin token and opens activity id's live page.
func (b *browser) openLive(id int64) {
	b.t.Helper()
	b.open("/admin/")
	b.waitVisible("#token")
	b.signIn(adminToken)
	b.waitVisible("#activities")
	b.open(fmt.Sprintf("/admin/#/activities/%d", id))
}

// The console's payments card: the sale's payments at the (simulated)
// provider against MySQL's record, in sync once the worker recorded the
// payment; an order looked up shows its status, the payment that paid it
// and that payment's record; an unknown order is said to be none.
func TestConsole_paymentsCard_reconciliationAndAnOrdersPayment(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	s.worker()
	id := s.activity("Phone", 10)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		t.Fatalf("publish: %d %v", r.code, r.body)
	}
	placed := s.order(1, id, 1)
	if placed.code != 202 {
		t.Fatalf("order: %d %v", placed.code, placed.body)
	}
	no := placed.str("order_no")
	paid := s.call("POST", "/v1/orders/"+no+"/pay", s.bearer(1), "")
	if paid.code != 200 || paid.str("status") != "paid" || paid.str("payment_id") == "" {
		t.Fatalf("pay: %d %v", paid.code, paid.body)
	}
	pid := paid.str("payment_id")
	deadline := time.Now().Add(15 * time.Second)
	for r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/payments", id), ""); r.body["in_sync"] != true; r = s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/payments", id), "") {
		if time.Now().After(deadline) {
			t.Fatalf("the reconciliation never in sync: %d %v; MySQL payments of %s: %d, of activity %d: %d", r.code, r.body,
				no, s.count("SELECT COUNT(*) FROM payments WHERE order_no = ?", no), id, s.count("SELECT COUNT(*) FROM payments WHERE activity_id = ?", id))
		}
		time.Sleep(100 * time.Millisecond)
	}

	b := newBrowser(t, chromium, s.base)
	b.openLive(id)
	b.waitText("#pay-state", is("in sync"))
	if prov, at, rec, flagged := b.text("#pay-provider"), b.text("#pay-at-provider"), b.text("#pay-recorded"), b.text("#pay-flagged"); prov != "simulated" ||
		at != "1" || rec != "1" || flagged != "0" {
		t.Fatalf("payments card: provider %q, at the provider %q, recorded %q, flagged %q", prov, at, rec, flagged)
	}

	b.fill("#order-no", no)
	b.click("#order-form button[type=submit]")
	b.waitText("#order-status", is("paid"))
	if by, list := b.text("#order-paid-by"), b.text("#order-payments"); by != pid || !strings.Contains(list, pid+": succeeded") {
		t.Fatalf("order %s: paid by %q, payments %q; want %s, succeeded", no, by, list, pid)
	}
	b.fill("#order-no", fmt.Sprintf("%d-06H0J68TSYHN2J2MDXSS60AGDR", id))
	b.click("#order-form button[type=submit]")
	b.waitText("#order-message", contains("No order"))
}

// A console opened on a running sale draws its last minutes at once: the
// worker's reconciler samples each live sale every pass, the admin API
// serves the samples (GET …/series), and the live page seeds both charts
// from them before its first poll — the first point is from before the
// page opened. The series endpoint refuses a bad window, naming it, and
// answers 404 for an unknown sale.
func TestConsole_livePage_opensWithTheSalesLastMinutes(t *testing.T) {
	waits(t)
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	id := s.activity("Phone", 1000)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		t.Fatalf("publish: %d %v", r.code, r.body)
	}
	s.worker()
	user := int64(0)
	for range 7 { // seven seconds of orders: three samples or more
		for range 5 {
			user++
			if r := s.order(user, id, 1); r.code != 202 {
				t.Fatalf("order: %d %v", r.code, r.body)
			}
		}
		time.Sleep(time.Second)
	}
	r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/series?minutes=5", id), "")
	samples, _ := r.body["samples"].([]any)
	if r.code != 200 || len(samples) < 3 {
		t.Fatalf("series: %d, %d samples %v; want 3+", r.code, len(samples), r.body)
	}
	last := -1.0
	for _, x := range samples {
		n := x.(map[string]any)["orders_accepted"].(float64)
		if n < last || n > float64(user) {
			t.Fatalf("samples %v: orders accepted must only grow, up to the %d placed", samples, user)
		}
		last = n
	}
	if r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/series?minutes=60", id), ""); r.code != 400 ||
		r.body["error"].(map[string]any)["field"] != "minutes" {
		t.Fatalf("a window of 60 minutes: %d %v, want 400 naming minutes", r.code, r.body)
	}
	if r := s.admin("GET", "/admin/v1/activities/987654/series", ""); r.code != 404 {
		t.Fatalf("an unknown sale's series: %d %v, want 404", r.code, r.body)
	}

	opened := time.Now()
	b := newBrowser(t, chromium, s.base)
	b.openLive(id)
	b.waitText("#live-name", is("Phone"))
	for _, chart := range []string{"#chart-rate", "#chart-lag"} {
		points, _ := strconv.Atoi(b.attr(chart, "data-points"))
		from, _ := strconv.ParseInt(b.attr(chart, "data-from"), 10, 64)
		if points < 2 || from == 0 || time.UnixMilli(from).After(opened.Add(-2*time.Second)) {
			t.Errorf("%s at its first render: %d points from %v (the page opened at %v); want the sale's last seconds drawn",
				chart, points, time.UnixMilli(from).Format(time.TimeOnly), opened.Format(time.TimeOnly))
		}
	}
}

// The live page reads on a desk and on a phone (issue 39): each chart has a
// value axis of round ticks in its unit, the highest at or above the
// highest value drawn and above the line, and a time axis of ages ending at
// "now", its labels apart, inside the chart and big enough to read; a sale
// of 40,000 shows its stock as "39,930 / 40,000" on one line, the total
// never wrapped under the count nor cut off by its card.
func TestConsole_livePage_chartsHaveAxes_andTheStockKeepsItsTotalOnItsLine(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	s.worker()
	id := s.activity("Phone", 40000)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		t.Fatalf("publish: %d %v", r.code, r.body)
	}
	b := newBrowser(t, chromium, s.base)
	b.openLive(id)
	b.waitText("#stock-remaining", is("40,000"))
	user := int64(0)
	for _, burst := range []int{10, 40, 20} { // a poll or more apart: a peak to scale to
		for range burst {
			user++
			if r := s.order(user, id, 1); r.code != 202 {
				t.Fatalf("order: %d %v", r.code, r.body)
			}
		}
		time.Sleep(1100 * time.Millisecond)
	}
	b.waitText("#stock-remaining", is("39,930"))

	for _, width := range []int64{1280, 360} {
		if width < 640 {
			b.run(chromedp.EmulateViewport(width, 800, chromedp.EmulateMobile))
		} else {
			b.run(chromedp.EmulateViewport(width, 900))
		}
		time.Sleep(1100 * time.Millisecond) // a poll at this size
		if ok, how := b.fitsWidth(); !ok {
			t.Errorf("at %d px: %s", width, how)
		}
		if f := b.stockFigure(); f.Count != 1 || f.Below != 0 || f.TotalLeft < f.CountRight || f.Overflow > 0 {
			t.Errorf("at %d px the stock figure %q is not on one line in its card: the count's lines %d (%.0f–%.0f px down, ending %.0f px across), "+
				"the total's boxes off that line %d (the last %.0f px down, the first starting %.0f px across), %.0f px past its card",
				width, f.Text, f.Count, f.CountTop, f.CountBottom, f.CountRight, f.Below, f.TotalMiddle, f.TotalLeft, f.Overflow)
		}
		for chart, unit := range map[string]string{"#chart-rate": "orders/s", "#chart-lag": "ms"} {
			checkAxes(t, fmt.Sprintf("%s at %d px", chart, width), b.axes(chart), unit)
		}
	}
}

// stockFigure is where the live page's stock figure lies: the count's line
// boxes (one unless it wraps), how many of the " / total"'s boxes are off
// the count's line, and how far the figure runs past its card.
type stockFigure struct {
	Text                              string
	Count, Below                      int
	CountTop, CountBottom, CountRight float64
	TotalMiddle, TotalLeft, Overflow  float64
}

func (b *browser) stockFigure() stockFigure {
	b.t.Helper()
	var f stockFigure
	b.eval(`(() => {
		const count = document.querySelector('#stock-remaining'), total = document.querySelector('#stock-total').parentElement;
		const value = count.closest('.value'), c = count.getClientRects(), t = total.getClientRects();
		const last = t[t.length - 1];
		const off = [...t].filter((r) => (r.top + r.bottom) / 2 < c[0].top || (r.top + r.bottom) / 2 > c[0].bottom);
		return {Text: value.textContent, Count: c.length, Below: off.length,
			CountTop: c[0].top, CountBottom: c[0].bottom, CountRight: c[0].right,
			TotalMiddle: (last.top + last.bottom) / 2, TotalLeft: t[0].left,
			Overflow: Math.max(value.scrollWidth - value.clientWidth, value.getBoundingClientRect().right - value.closest('.figure').getBoundingClientRect().right)};
	})()`, &f)
	return f
}

// axes is what a live chart shows of its axes, each label's box relative to
// the chart's.
type axes struct {
	Width, Height float64
	Unit          string
	Y, X          []tickLabel // the value ticks from the bottom up, the time ticks from the left
	LineTop       float64     // the line's highest point (-1 for no line)
	Caption       string
}

type tickLabel struct {
	Text                     string
	Left, Right, Top, Bottom float64
}

func (b *browser) axes(chart string) axes {
	b.t.Helper()
	var a axes
	b.eval(`(() => {
		const svg = document.querySelector(`+js(chart)+`), box = svg.getBoundingClientRect();
		const labels = (q) => [...svg.querySelectorAll(q)].map((e) => {
			const r = e.getBoundingClientRect();
			return {Text: e.textContent, Left: r.left - box.left, Right: r.right - box.left, Top: r.top - box.top, Bottom: r.bottom - box.top};
		});
		const line = svg.querySelector('path.line'), unit = svg.querySelector('.y-axis .unit');
		return {Width: box.width, Height: box.height, Unit: unit ? unit.textContent : '',
			Y: labels('.y-axis .tick text'), X: labels('.x-axis .tick text'),
			LineTop: line ? line.getBoundingClientRect().top - box.top : -1,
			Caption: svg.closest('figure').querySelector('figcaption .hint').textContent};
	})()`, &a)
	return a
}

var (
	captionMax = regexp.MustCompile(`max ([\d,]+)`)
	ageTick    = regexp.MustCompile(`^-(\d+m)?(\d+s)?$`)
)

// checkAxes fails t unless a has a value axis in unit whose round ticks
// reach the highest value in its caption, above its line, and a time axis
// ending at "now"; every label inside the chart, apart from the others and
// at least 10 px tall.
func checkAxes(t *testing.T, what string, a axes, unit string) {
	t.Helper()
	if a.Unit != unit || len(a.Y) < 2 || len(a.X) < 2 {
		t.Errorf("%s: value axis in %q with %d ticks, time axis with %d ticks; want %q, 2 or more of each", what, a.Unit, len(a.Y), len(a.X), unit)
		return
	}
	m := captionMax.FindStringSubmatch(a.Caption)
	if m == nil {
		t.Errorf("%s: the caption %q names no max", what, a.Caption)
		return
	}
	highest, _ := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	values := make([]float64, len(a.Y))
	for i, l := range a.Y {
		v, err := tickValue(l.Text)
		if err != nil || (i > 0 && (v <= values[i-1] || l.Bottom > a.Y[i-1].Top)) {
			t.Errorf("%s: value ticks %v: %q is not a number above the one below it", what, a.Y, l.Text)
			return
		}
		values[i] = v
	}
	top := a.Y[len(a.Y)-1]
	if values[0] != 0 || values[len(values)-1] < highest || (a.LineTop >= 0 && a.LineTop < (top.Top+top.Bottom)/2-1) {
		t.Errorf("%s: value ticks %v from %v to %v, the line's top %.0f px down; want 0 up to the max drawn (%q), the line below the top tick",
			what, a.Y, values[0], values[len(values)-1], a.LineTop, a.Caption)
	}
	if last := a.X[len(a.X)-1].Text; last != "now" {
		t.Errorf("%s: time ticks %v end at %q, want now", what, a.X, last)
	}
	for i, l := range a.X[:len(a.X)-1] {
		if !ageTick.MatchString(l.Text) || l.Text == "-" || l.Right > a.X[i+1].Left {
			t.Errorf("%s: time ticks %v: %q is not an age like -30s or -1m, left of the next and apart from it", what, a.X, l.Text)
		}
	}
	for _, l := range append(append([]tickLabel{}, a.Y...), a.X...) {
		if l.Left < 0 || l.Right > a.Width || l.Top < 0 || l.Bottom > a.Height || l.Bottom-l.Top < 10 {
			t.Errorf("%s: the label %q at %.0f–%.0f across, %.0f–%.0f down, is outside the %.0f×%.0f px chart or under 10 px tall",
				what, l.Text, l.Left, l.Right, l.Top, l.Bottom, a.Width, a.Height)
		}
	}
}

// tickValue reads a value tick's label: 1,500 or 1.5K or 2M.
func tickValue(s string) (float64, error) {
	mul := 1.0
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1e3, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mul, s = 1e6, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return v * mul, err
}
