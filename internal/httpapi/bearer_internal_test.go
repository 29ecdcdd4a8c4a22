package httpapi

import "testing"

// The bearer scheme is read in any case, a run of spaces parts it from the
// token, and anything else is no bearer token.
func TestBearerToken_schemeInAnyCase_otherSchemesRefused(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"bEaReR abc", "abc", true},
		{"Bearer   abc", "abc", true},
		{"Bearer a.b.c", "a.b.c", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"Basic abc", "", false},
		{"Bearerabc", "", false},
		{"Bearer-x abc", "", false},
		{"abc", "", false},
	} {
		token, ok := bearerToken(tc.header)
		if token != tc.token || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}
