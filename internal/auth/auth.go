// Package auth issues and checks the shoppers' bearer tokens: HS256 JWTs
// whose subject is the user id.
package auth

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrInvalid means the token is missing, malformed, forged, expired, or signed
// with anything but HS256 (alg "none" included).
var ErrInvalid = errors.New("auth: invalid token")

// MinSecretLen is the shortest JWT_SECRET accepted: HS256 needs 256 bits.
const MinSecretLen = 32

// DefaultCacheSize is how many verified tokens New remembers.
const DefaultCacheSize = 131072

// leeway is the clock skew allowed on a token's expiry.
const leeway = 5 * time.Second

// Tokens issues and verifies tokens with one secret.
//
// Verified tokens are remembered (tokenCache: a set-associative table
// keyed by the token as sent, with the user id and expiry) until they
// expire: a shopper's app sends the same token on every click, and
// parsing it — mostly decoding its JSON, not the HMAC — was 11% of the
// API's CPU on the order path. Only a token that passed full verification
// is remembered, and a hit needs its signature and a keyed hash of the
// whole string (tokenCache says why that is enough); an expired entry is
// verified afresh (and refused). Each entry is 72 bytes, none of them a
// pointer (TestTokenCache_holdsNoPointers), made at start: the default
// cache is 9.4 MB (BenchmarkCacheMemory compares it with the LRU before).
type Tokens struct {
	secret []byte
	cache  *tokenCache // nil: no cache
	// parser checks HS256, the expiry and the leeway; built once (a parser
	// is read-only once built, so shared by every Verify), where each
	// verification built its own with its options before (BenchmarkVerify).
	parser *jwt.Parser
	keyFn  jwt.Keyfunc

	hits, misses atomic.Int64 // Verify answered from the cache, or not
}

// CacheStats returns how many verifications the cache answered and how many
// it did not (refused tokens included), for sizing JWT_CACHE_SIZE.
func (t *Tokens) CacheStats() (hits, misses int64) { return t.hits.Load(), t.misses.Load() }

// New returns Tokens for secret, which must be at least MinSecretLen bytes,
// remembering up to DefaultCacheSize verified tokens.
func New(secret string) (*Tokens, error) {
	return NewWithCache(secret, DefaultCacheSize)
}

// NewWithCache is New remembering up to size verified tokens; 0 turns the
// cache off.
func NewWithCache(secret string, size int) (*Tokens, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: JWT_SECRET must be at least %d bytes", MinSecretLen)
	}
	if size < 0 {
		return nil, fmt.Errorf("auth: token cache size %d is negative", size)
	}
	t := &Tokens{secret: []byte(secret), parser: newParser()}
	key := any(t.secret) // boxed once: returned as is, a []byte made an interface allocated on every verify
	t.keyFn = func(*jwt.Token) (any, error) { return key, nil }
	if size > 0 {
		t.cache = newTokenCache(size)
	}
	return t, nil
}

// Issue returns a token for userID that expires after ttl.
func (t *Tokens) Issue(userID int64, ttl time.Duration) (string, error) {
	if userID <= 0 {
		return "", fmt.Errorf("auth: user id %d: want a positive integer", userID)
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(t.secret)
}

// Verify checks token and returns its user id.
func (t *Tokens) Verify(token string) (int64, error) {
	var now time.Time
	if t.cache != nil {
		now = time.Now()
		if user, exp, ok := t.cache.get(token); ok {
			if now.Before(exp.Add(leeway)) {
				t.hits.Add(1)
				return user, nil
			}
			t.cache.remove(token)
		}
		t.misses.Add(1)
	}
	id, exp, err := t.verify(token)
	if err != nil {
		return 0, err
	}
	if t.cache != nil {
		t.cache.add(token, id, exp, now)
	}
	return id, nil
}

// newParser is the tokens' parser: HS256 only, an expiry required, checked
// with leeway.
func newParser() *jwt.Parser {
	return jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
	)
}

// verify parses and checks token: the signature, HS256, the expiry (and
// a not-before, if a token has one), the subject.
func (t *Tokens) verify(token string) (int64, time.Time, error) {
	var c claims
	if _, err := t.parser.ParseWithClaims(token, &c, t.keyFn); err != nil {
		return 0, time.Time{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	id, err := strconv.ParseInt(c.Sub, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != c.Sub {
		return 0, time.Time{}, fmt.Errorf("%w: subject %q is not a positive integer user id", ErrInvalid, c.Sub)
	}
	return id, numericDate(c.Exp).Time, nil
}

// claims are what verify reads of a token's claims: the subject and the
// times the parser checks, as plain fields. Why not jwt.RegisteredClaims,
// which Issue writes: each of its dates (jwt.NumericDate) runs a
// json.Unmarshal of its own inside the claims', and the issuer and
// audience it also decodes are never checked here — together an eighth of
// a fresh token's verify and 7 of its 46 allocations
// (BenchmarkVerifyClaims). Only a token signed with our secret gets past
// the parser, so the only claims read here are Issue's: numbers for the
// times, the user id for the subject.
type claims struct {
	Sub string   `json:"sub"`
	Exp *float64 `json:"exp"`
	Nbf *float64 `json:"nbf"`
}

// numericDate is seconds as jwt.NumericDate decodes them (whole seconds
// and a fraction; nil for a claim not there).
func numericDate(secs *float64) *jwt.NumericDate {
	if secs == nil {
		return nil
	}
	whole, frac := math.Modf(*secs)
	return jwt.NewNumericDate(time.Unix(int64(whole), int64(frac*1e9)))
}

func (c *claims) GetExpirationTime() (*jwt.NumericDate, error) { return numericDate(c.Exp), nil }
func (c *claims) GetNotBefore() (*jwt.NumericDate, error)      { return numericDate(c.Nbf), nil }
func (c *claims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil } // not checked (no WithIssuedAt)
func (c *claims) GetIssuer() (string, error)                   { return "", nil }  // not checked (no WithIssuer)
func (c *claims) GetSubject() (string, error)                  { return c.Sub, nil }
func (c *claims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil } // not checked (no WithAudience)
