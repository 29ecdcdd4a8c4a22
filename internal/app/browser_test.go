package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium on one page, driven by chromedp, for the
// admin console's tests.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu         sync.Mutex
	pageErrors []string // uncaught exceptions, console errors, CSP refusals
}

// browserWait bounds every wait for the page to show something.
const browserWait = 15 * time.Second

// newBrowser starts the headless Chromium at exec (testenv.Chromium, called
// first thing in a test so that a missing browser fails it before any
// server starts) whose pages load from base. It runs in UTC, so times typed
// into the forms mean what the test means.
func newBrowser(t *testing.T, exec, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exec),
		chromedp.NoSandbox, // tests may run as root, where Chromium's sandbox refuses to start
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1200, 900),
		chromedp.Env("TZ=UTC", "LANG=en_US.UTF-8"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	var mu sync.Mutex
	done := false
	logf := func(format string, args ...any) { // chromedp may log after the test: then stay quiet
		mu.Lock()
		defer mu.Unlock()
		if !done && !strings.Contains(format, "unmarshal event") && !strings.Contains(format, "unhandled node event") {
			t.Logf("chromedp: "+format, args...)
		}
	}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills Chromium and removes its profile dir
		mu.Lock()
		done = true
		mu.Unlock()
	})
	b := &browser{t: t, ctx: ctx, base: base}
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = ev.ExceptionDetails.Error()
		case *cdplog.EventEntryAdded:
			// The network's errors are the API's 4xx answers the tests
			// provoke; anything else logged as an error is the page's.
			if ev.Entry.Level == cdplog.LevelError && ev.Entry.Source != cdplog.SourceNetwork {
				msg = ev.Entry.Source.String() + ": " + ev.Entry.Text
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.pageErrors = append(b.pageErrors, msg)
			b.mu.Unlock()
		}
	})
	// The first Run starts Chromium and ties it to ctx itself (a derived
	// context's end would stop the browser), so it is bounded by a timer.
	stuck := time.AfterFunc(30*time.Second, cancel)
	err := chromedp.Run(ctx)
	stuck.Stop()
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(func() { // before Chromium stops (cleanups run last first)
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.pageErrors) > 0 {
			t.Errorf("the page had errors:\n  %s", strings.Join(b.pageErrors, "\n  "))
		}
	})
	return b
}

// run runs actions, failing the test on an error; each call is bounded.
func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v (page: %s)", err, b.location())
	}
}

func (b *browser) location() string {
	var href string
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	_ = chromedp.Run(ctx, chromedp.Evaluate(`location.href`, &href))
	return href
}

// eval evaluates a JS expression into res.
func (b *browser) eval(expr string, res any) {
	b.t.Helper()
	b.run(chromedp.Evaluate(expr, res))
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// text is the text of the first element sel matches ("" when none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.eval(`(document.querySelector(`+js(sel)+`) || {}).textContent || ""`, &s)
	return strings.TrimSpace(s)
}

// attr is an attribute of the first element sel matches ("" when none).
func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	var s string
	b.eval(`(document.querySelector(`+js(sel)+`) || {getAttribute: () => ""}).getAttribute(`+js(name)+`) || ""`, &s)
	return s
}

// waitFor waits until ok holds of what get returns, and returns that;
// after browserWait it fails the test, saying what it waited for.
func (b *browser) waitFor(what string, get func() string, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(browserWait)
	for {
		v := get()
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waited %v for %s; it is %q (page: %s)", browserWait, what, v, b.location())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until sel's text satisfies ok.
func (b *browser) waitText(sel string, ok func(string) bool) string {
	b.t.Helper()
	return b.waitFor("the text of "+sel, func() string { return b.text(sel) }, ok)
}

func is(want string) func(string) bool { return func(s string) bool { return s == want } }

func contains(want string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, want) }
}

// visible reports whether sel matches an element that is rendered.
func (b *browser) visible(sel string) bool {
	b.t.Helper()
	var v bool
	b.eval(`(() => { const e = document.querySelector(`+js(sel)+`); return !!e && e.getClientRects().length > 0; })()`, &v)
	return v
}

func (b *browser) waitVisible(sel string) {
	b.t.Helper()
	b.waitFor(sel+" shown", func() string { return fmt.Sprint(b.visible(sel)) }, is("true"))
}

// fill replaces an input's value as if typed.
func (b *browser) fill(sel, value string) {
	b.t.Helper()
	b.set(sel, "")
	b.run(chromedp.SendKeys(sel, value, chromedp.ByQuery))
}

// set sets an input's or select's value directly, with the events typing
// would fire (for datetime-local inputs, whose typing depends on the
// locale, and selects). A datetime-local input keeps "…T21:03:00" as
// "…T21:03": that is the value taken, not refused (once a minute, tests
// giving seconds failed here with "refused the value").
func (b *browser) set(sel, value string) {
	b.t.Helper()
	b.waitVisible(sel)
	var ok bool
	b.eval(`(() => { const e = document.querySelector(`+js(sel)+`); e.value = `+js(value)+`;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true}));
		const v = `+js(value)+`;
		return e.value === v || (e.type === 'datetime-local' && e.value + ':00' === v); })()`, &ok)
	if !ok {
		b.t.Fatalf("%s refused the value %q", sel, value)
	}
}

// signIn submits token on the sign-in page (shown: the console asks for
// a token); what follows, the activities or an error, is the caller's to
// wait for.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.fill("#token", token)
	b.click("#signin-form button[type=submit]")
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.waitVisible(sel)
	b.run(chromedp.Click(sel, chromedp.ByQuery))
}

// open loads path (on the stack) in the page.
func (b *browser) open(path string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base + path))
}

// hash is the page's location.hash.
func (b *browser) hash() string {
	var h string
	b.eval(`location.hash`, &h)
	return h
}

// fitsWidth reports whether the page needs no sideways scrolling.
func (b *browser) fitsWidth() (bool, string) {
	var r struct{ Scroll, Inner int }
	b.eval(`({Scroll: document.documentElement.scrollWidth, Inner: window.innerWidth})`, &r)
	return r.Scroll <= r.Inner, fmt.Sprintf("page %d px wide in a %d px window", r.Scroll, r.Inner)
}

// screenshot writes the whole page to docs/img/console-<name>.png when
// CONSOLE_SCREENSHOTS is set (docs/console.md's pictures are made this way).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("CONSOLE_SCREENSHOTS") == "" {
		return
	}
	var png []byte
	b.run(chromedp.FullScreenshot(&png, 100)) // 100: PNG
	dir := filepath.Join("..", "..", "docs", "img")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
