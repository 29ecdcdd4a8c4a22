package auth_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/internal/auth"
)

const secret = "0123456789abcdef0123456789abcdef"

func TestVerify(t *testing.T) {
	tok, _ := auth.New(secret)
	good, err := tok.Issue(42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := tok.Verify(good); err != nil || id != 42 {
		t.Fatalf("good token: %d, %v", id, err)
	}

	other, _ := auth.New(strings.Repeat("x", 32))
	forged, _ := other.Issue(42, time.Hour)
	expired, _ := tok.Issue(42, -time.Minute)
	sign := func(m jwt.SigningMethod, key any, claims jwt.Claims) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	future := jwt.NewNumericDate(time.Now().Add(time.Hour))
	noExp := sign(jwt.SigningMethodHS256, []byte(secret), jwt.RegisteredClaims{Subject: "42"})
	badSub := sign(jwt.SigningMethodHS256, []byte(secret), jwt.RegisteredClaims{Subject: "-4", ExpiresAt: future})
	notYet := sign(jwt.SigningMethodHS256, []byte(secret), jwt.RegisteredClaims{Subject: "42", ExpiresAt: future,
		NotBefore: future})
	hs512 := sign(jwt.SigningMethodHS512, []byte(secret), jwt.RegisteredClaims{Subject: "42", ExpiresAt: future})
	none := sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.RegisteredClaims{Subject: "42", ExpiresAt: future})
	// alg "none" hand-made, signature stripped:
	parts := strings.Split(good, ".")
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	stripped := header + "." + parts[1] + "."

	for name, bad := range map[string]string{
		"empty": "", "garbage": "not.a.token", "forged": forged, "expired": expired, "no exp": noExp,
		"negative subject": badSub, "not before an hour from now": notYet, "HS512": hs512, "alg none": none, "alg none, hand-made": stripped,
		"tampered payload": parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","exp":9999999999}`)) + "." + parts[2],
	} {
		if id, err := tok.Verify(bad); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("%s: got %d, %v; want ErrInvalid", name, id, err)
		}
	}
	// The claims verify reads are the subject and the times: an issuer
	// and audience are not checked, an expiry is given the leeway (5 s),
	// and a time may have a fraction of a second.
	for name, ok := range map[string]string{
		"issuer and audience": sign(jwt.SigningMethodHS256, []byte(secret), jwt.RegisteredClaims{Subject: "7",
			ExpiresAt: future, Issuer: "someone", Audience: jwt.ClaimStrings{"a", "b"}, IssuedAt: jwt.NewNumericDate(time.Now())}),
		"expired 2 s ago": sign(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "7",
			"exp": time.Now().Add(-2 * time.Second).Unix()}),
		"fractional times": sign(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "7",
			"exp": float64(time.Now().Add(time.Hour).UnixMilli()) / 1000, "nbf": float64(time.Now().Add(-time.Minute).UnixMilli()) / 1000}),
	} {
		if id, err := tok.Verify(ok); err != nil || id != 7 {
			t.Errorf("%s: got %d, %v; want user 7", name, id, err)
		}
	}
	if _, err := auth.New("short"); err == nil {
		t.Error("a short secret was accepted")
	}
}

// Tokens issues the same bytes golang-jwt did for the same claims (its
// RegisteredClaims: subject, expiry, issued-at): an api of the version
// before verifies this one's tokens and the other way round, in a rolling
// upgrade.
func TestIssue_sameTokenAsGolangJWT(t *testing.T) {
	tok, _ := auth.New(secret)
	s, err := tok.Issue(42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.RegisteredClaims
	if _, err := jwt.ParseWithClaims(s, &c, func(*jwt.Token) (any, error) { return []byte(secret), nil },
		jwt.WithValidMethods([]string{"HS256"})); err != nil {
		t.Fatalf("golang-jwt refused our token: %v", err)
	}
	if c.Subject != "42" || c.ExpiresAt.Sub(c.IssuedAt.Time) != time.Hour {
		t.Fatalf("claims %+v", c)
	}
	want, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "42",
		IssuedAt: c.IssuedAt, ExpiresAt: c.ExpiresAt}).SignedString([]byte(secret))
	if s != want {
		t.Fatalf("ours:       %s\ngolang-jwt: %s", s, want)
	}
}
