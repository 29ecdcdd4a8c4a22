package testenv

import "testing"

// Chromium returns the path of a Chromium (or Chrome) for browser tests
// (chromedp drives it headless). A missing browser fails the test, saying
// how to install it, like a missing server: never a skip.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := lookPath(name); err == nil {
			return p
		}
	}
	return requireBinary(t, "chromium", "chromium")
}
