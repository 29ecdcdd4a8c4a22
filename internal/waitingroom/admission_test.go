package waitingroom_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

const admissionSecret = "an admission secret of 32 bytes!"

// An admission issued now is the same bytes golang-jwt signed for the same
// claims before 2026-11-30, so apis of either version check each other's
// in a rolling upgrade.
func TestAdmit_sameTokenAsGolangJWT(t *testing.T) {
	s, err := waitingroom.NewSigner(admissionSecret)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Unix(time.Now().Add(time.Minute).Unix(), 0)
	got, err := s.Issue(7, 3, until)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, struct {
		jwt.RegisteredClaims
		Sale int64 `json:"sale"`
	}{jwt.RegisteredClaims{Subject: "7", Audience: jwt.ClaimStrings{"flashsale-admission"},
		ExpiresAt: jwt.NewNumericDate(until)}, 3}).SignedString([]byte(admissionSecret))
	if got != want {
		t.Fatalf("ours:       %s\ngolang-jwt: %s", got, want)
	}
	if again, _ := s.Issue(7, 3, until); again != got {
		t.Fatal("the same arguments gave another token")
	}
}

// Verify takes only an admission of this secret, HS256, for its audience,
// unexpired (2 s of leeway): a shopper's bearer token signed with the same
// secret is no admission.
func TestAdmit_verifyRefusesWhatIsNoAdmission(t *testing.T) {
	s, _ := waitingroom.NewSigner(admissionSecret)
	key := []byte(admissionSecret)
	sign := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	claims := func(exp time.Time, aud any) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "7", "sale": 3, "exp": exp.Unix()}
		if aud != nil {
			c["aud"] = aud
		}
		return c
	}
	hour := now.Add(time.Hour)
	bearers, _ := auth.New(admissionSecret)
	bearer, _ := bearers.Issue(7, time.Hour)
	for name, c := range map[string]struct {
		tok string
		ok  bool
	}{
		"an array audience":        {sign(jwt.SigningMethodHS256, key, claims(hour, []string{"flashsale-admission"})), true},
		"a string audience":        {sign(jwt.SigningMethodHS256, key, claims(hour, "flashsale-admission")), true},
		"expired now (leeway)":     {sign(jwt.SigningMethodHS256, key, claims(now, "flashsale-admission")), true},
		"expired 3 s ago":          {sign(jwt.SigningMethodHS256, key, claims(now.Add(-3*time.Second), "flashsale-admission")), false},
		"no audience":              {sign(jwt.SigningMethodHS256, key, claims(hour, nil)), false},
		"another audience":         {sign(jwt.SigningMethodHS256, key, claims(hour, []string{"x", "y"})), false},
		"a bearer token, same key": {bearer, false},
		"no expiry":                {sign(jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "7", "sale": 3, "aud": "flashsale-admission"}), false},
		"not before an hour":       {sign(jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "7", "sale": 3, "aud": "flashsale-admission", "exp": now.Add(2 * time.Hour).Unix(), "nbf": hour.Unix()}), false},
		"HS512":                    {sign(jwt.SigningMethodHS512, key, claims(hour, "flashsale-admission")), false},
		"alg none":                 {sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(hour, "flashsale-admission")), false},
		"another secret":           {sign(jwt.SigningMethodHS256, []byte("another secret of 32 bytes here!"), claims(hour, "flashsale-admission")), false},
		"the sale a string":        {sign(jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "7", "sale": "3", "aud": "flashsale-admission", "exp": hour.Unix()}), false},
	} {
		err := s.Verify(c.tok, 7, 3)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, waitingroom.ErrNotAdmitted)) {
			t.Errorf("%s: %v; want admitted %v", name, err, c.ok)
		}
	}
}
