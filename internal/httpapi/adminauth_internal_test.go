package httpapi

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// The guard keeps the token's SHA-256 digest, never the token, and admits
// exactly the token: its digest and the one of what was sent are compared,
// 32 bytes each, whatever either's length (a prefix, the token and more,
// nothing, one byte off).
func TestAdminGuard_comparesSHA256DigestsOfEqualLength(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef-admin"
	g := newAdminGuard(tok, AdminLimit{})
	if g.digest != sha256.Sum256([]byte(tok)) {
		t.Fatal("the guard's digest is not the token's SHA-256")
	}
	if kept := fmt.Sprintf("%+v", *g); strings.Contains(kept, tok) {
		t.Fatalf("the guard keeps the token itself: %s", kept)
	}
	if !g.matches(tok) {
		t.Fatal("the token is not admitted")
	}
	for _, got := range []string{"", tok[:1], tok[:len(tok)-1], tok + "x", strings.ToUpper(tok), "1" + tok[1:], strings.Repeat("x", 10_000)} {
		if g.matches(got) {
			t.Errorf("%q admitted", got)
		}
	}
}
