// Package auth issues and checks the shoppers' bearer tokens: HS256 JWTs
// whose subject is the user id.
//
// The JWT library is cristalhq/jwt, not golang-jwt, which issued and
// verified them until 2026-11-30 (issue 43): a token not cached — every
// shopper's first request at a launch — cost golang-jwt 4.7–4.9 µs and 39
// allocations to verify (its header decoded into a map, its claims
// through a json.Decoder, a new HMAC each time), 12% of the api's CPU at
// a launch, and cristalhq/jwt 2.9–3.4 µs and 19 (the header into a
// struct, the claims into ours, pooled HMACs): BenchmarkVerifyLibraries
// runs both. The tokens are the same bytes either way
// (TestIssue_sameTokenAsGolangJWT), so an api of either version verifies
// the other's. cristalhq/jwt checks the signature and the algorithm only;
// the claims' times are checked here (checkTimes), as golang-jwt's
// validator did: an expiry required, five seconds' leeway.
package auth

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cristalhq/jwt/v4"
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
	cache *tokenCache // nil: no cache
	// hs signs and verifies HS256 (its HMACs pooled); issue builds tokens
	// with its header encoded once. Both are safe for concurrent use.
	hs    *jwt.HSAlg
	issue *jwt.Builder

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
	hs, err := jwt.NewSignerHS(jwt.HS256, []byte(secret))
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	t := &Tokens{hs: hs, issue: jwt.NewBuilder(hs)}
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
	tok, err := t.issue.Build(issued{Sub: strconv.FormatInt(userID, 10), Exp: now.Add(ttl).Unix(), Iat: now.Unix()})
	if err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	return tok.String(), nil
}

// issued are the claims Issue writes, in the order and form golang-jwt's
// RegisteredClaims wrote them (whole seconds), so the tokens are the same.
type issued struct {
	Sub string `json:"sub"`
	Exp int64  `json:"exp"`
	Iat int64  `json:"iat"`
}

// Verify checks token and returns its user id.
func (t *Tokens) Verify(token string) (int64, error) {
	now := time.Now()
	if t.cache != nil {
		if user, exp, ok := t.cache.get(token); ok {
			if now.Before(exp.Add(leeway)) {
				t.hits.Add(1)
				return user, nil
			}
			t.cache.remove(token)
		}
		t.misses.Add(1)
	}
	id, exp, err := t.verify(token, now)
	if err != nil {
		return 0, err
	}
	if t.cache != nil {
		t.cache.add(token, id, exp, now)
	}
	return id, nil
}

// verify parses and checks token: the signature, HS256 (jwt.ParseClaims with
// the HS256 verifier refuses any other alg, "none" included), the expiry
// (and a not-before, if a token has one) at now, the subject.
func (t *Tokens) verify(token string, now time.Time) (int64, time.Time, error) {
	var c claims
	if err := jwt.ParseClaims([]byte(token), t.hs, &c); err != nil {
		return 0, time.Time{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	exp, err := CheckTimes(c.Exp, c.Nbf, now, leeway)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	id, err := strconv.ParseInt(c.Sub, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != c.Sub {
		return 0, time.Time{}, fmt.Errorf("%w: subject %q is not a positive integer user id", ErrInvalid, c.Sub)
	}
	return id, exp, nil
}

// claims are what verify reads of a token's claims: the subject and the
// times, as plain fields (a jwt.NumericDate runs a json.Unmarshal of its
// own inside the claims'; issuer and audience are never checked). Only a
// token signed with our secret gets this far, so the claims read here are
// Issue's: numbers for the times, the user id for the subject.
type claims struct {
	Sub string   `json:"sub"`
	Exp *float64 `json:"exp"`
	Nbf *float64 `json:"nbf"`
}

// CheckTimes checks a token's expiry (required) and not-before (if given),
// in seconds since the epoch as JWTs carry them, against now with leeway
// each way, as golang-jwt's validator did (WithExpirationRequired,
// WithLeeway; its dates in whole seconds): expired unless now is before
// exp + leeway, not yet valid when now + leeway is before nbf. It returns
// the expiry.
func CheckTimes(exp, nbf *float64, now time.Time, leeway time.Duration) (time.Time, error) {
	if exp == nil {
		return time.Time{}, errors.New("token has no expiry")
	}
	e := seconds(*exp)
	if !now.Before(e.Add(leeway)) {
		return time.Time{}, errors.New("token is expired")
	}
	if nbf != nil && now.Add(leeway).Before(seconds(*nbf)) {
		return time.Time{}, errors.New("token is not valid yet")
	}
	return e, nil
}

// seconds is a NumericDate's seconds as a time, rounded down to a whole
// second as golang-jwt's NumericDate held it (TimePrecision).
func seconds(secs float64) time.Time {
	return time.Unix(int64(math.Floor(secs)), 0)
}
