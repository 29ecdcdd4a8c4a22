// Package jsonwtest holds what the tests of JSON written by hand share:
// strings that exercise every escape encoding/json makes, for comparing a
// hand-written encoder's bytes with json.Marshal's.
package jsonwtest

// OddStrings are every escape encoding/json makes (quotes, backslashes,
// control characters, the HTML characters, U+2028 and U+2029, invalid
// UTF-8), and plain strings for the fast path: an order number, a SKU, a
// traceparent.
var OddStrings = []string{
	"", "SKU-1", "42-06H0J68TSYHN2J2MDXSS60AGDR", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	`quo"te`, `back\slash`, "<b>&amp;</b>", "tab\tnew\nline\r", "\x00\x01\x1f\x7f", "héllo", "日本",
	"\u2028\u2029", "bad\xffutf8", "\xed\xa0\x80", "~!@#$%^*()_+{}|:?",
}
