package auth

import (
	"strings"
	"testing"
	"time"
)

// Bearer tokens come from anyone: Verify never panics, and accepts only
// what this secret signed — here, tokens of user 42 — however the fuzzer
// bends them (algorithms, headers, claims, padding), with or without the
// verified-token cache, and the same way twice — and as golang-jwt, which
// verified them before 2026-11-30, does.
func FuzzVerify(f *testing.F) {
	tokens, err := NewWithCache(strings.Repeat("k", 32), 64)
	if err != nil {
		f.Fatal(err)
	}
	plain, _ := New(strings.Repeat("k", 32))
	good, _ := tokens.Issue(42, time.Hour)
	expired, _ := tokens.Issue(42, -time.Minute)
	other, _ := NewWithCache(strings.Repeat("o", 32), 0)
	forged, _ := other.Issue(7, time.Hour)
	for _, s := range []string{good, expired, forged, "", ".", "..", good + ".", good[:len(good)-1],
		"eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiI3IiwiZXhwIjo0MTAyNDQ0ODAwfQ.",
		"eyJhbGciOiJIUzUxMiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI3In0.x"} {
		f.Add(s)
	}
	peer := newGolangJWT(strings.Repeat("k", 32))
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := tokens.Verify(tok)
		id2, err2 := tokens.Verify(tok) // the second may come from the cache
		id3, err3 := plain.Verify(tok)  // no cache
		if (err == nil) != (err2 == nil) || (err == nil) != (err3 == nil) || id != id2 || id != id3 {
			t.Fatalf("%q: %d/%v, then %d/%v, uncached %d/%v", tok, id, err, id2, err2, id3, err3)
		}
		if pid, perr := peer.verify(tok); (perr == nil) != (err == nil) || pid != id {
			t.Fatalf("%q: %d/%v here, %d/%v by golang-jwt", tok, id, err, pid, perr)
		}
		if err == nil && id != 42 {
			t.Fatalf("%q accepted as user %d; only user 42's tokens were signed", tok, id)
		}
	})
}
