package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gjwt "github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
)

const testSecret = "0123456789abcdef0123456789abcdef"

// The cache answers only for the exact string that passed verification, and
// only until the token's expiry (plus the leeway Verify allows).
func TestVerify_cache_onlyExactVerifiedTokensUntilTheyExpire(t *testing.T) {
	tok, err := NewWithCache(testSecret, 8)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := tok.Issue(42, time.Hour)
	if id, err := tok.Verify(good); err != nil || id != 42 {
		t.Fatalf("good token: %d, %v", id, err)
	}
	if user, _, ok := tok.cache.get(good); !ok || user != 42 {
		t.Fatalf("a verified token was not remembered: %d %v", user, ok)
	}
	if id, err := tok.Verify(good); err != nil || id != 42 {
		t.Fatalf("good token again: %d, %v", id, err)
	}
	if hits, misses := tok.CacheStats(); hits != 1 || misses != 1 {
		t.Fatalf("cache stats %d hits, %d misses; want 1 and 1", hits, misses)
	}
	// A changed character of the signature is another string: verified
	// afresh and refused, never served from the cache. (Not the last
	// character: its low bits are base64 padding, which decoding ignores.)
	i := len(good) - 10
	swapped := good[:i] + map[bool]string{true: "A", false: "Q"}[good[i] != 'A'] + good[i+1:]
	if _, err := tok.Verify(swapped); !errors.Is(err, ErrInvalid) {
		t.Fatalf("altered token: %v", err)
	}
	if _, err := tok.Verify(strings.ToUpper(good)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("upper-cased token: %v", err)
	}
	// The remembered token's signature on a changed payload (another
	// user's claims): refused, though the cache holds that signature.
	parts := strings.Split(good, ".")
	other, _ := tok.Issue(4242, time.Hour)
	forged := parts[0] + "." + strings.Split(other, ".")[1] + "." + parts[2]
	if id, err := tok.Verify(forged); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a cached signature on other claims: %d, %v", id, err)
	}

	// An entry whose token has expired beyond the leeway is not trusted: the
	// token is verified afresh, refused, and dropped from the cache.
	expired, _ := tok.Issue(43, -time.Minute)
	tok.cache.add(expired, 43, time.Now().Add(-leeway-time.Millisecond), time.Now())
	if id, err := tok.Verify(expired); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expired token served from the cache: %d, %v", id, err)
	}
	if _, _, ok := tok.cache.get(expired); ok {
		t.Fatal("expired entry kept")
	}
	// Refused tokens are never remembered.
	if _, _, ok := tok.cache.get(swapped); ok {
		t.Fatal("a refused token was remembered")
	}

	// Bounded: one set of 8 here, whatever comes.
	for i := range 20 {
		s, _ := tok.Issue(int64(100+i), time.Hour)
		if id, err := tok.Verify(s); err != nil || id != int64(100+i) {
			t.Fatalf("token %d: %d, %v", i, id, err)
		}
	}
	if n := tok.cache.len(); n != 8 {
		t.Fatalf("cache holds %d entries, want its size 8", n)
	}
}

func TestNewWithCache_zeroIsOffAndNegativeRefused(t *testing.T) {
	tok, err := NewWithCache(testSecret, 0)
	if err != nil || tok.cache != nil {
		t.Fatalf("size 0: %v, cache %v", err, tok.cache)
	}
	good, _ := tok.Issue(7, time.Hour)
	if id, err := tok.Verify(good); err != nil || id != 7 {
		t.Fatalf("uncached verify: %d, %v", id, err)
	}
	if _, err := NewWithCache(testSecret, -1); err == nil {
		t.Fatal("negative size accepted")
	}
}

// BenchmarkVerify: 10,000 users' tokens in turn, verified afresh every time
// vs remembered (go test -run '^$' -bench Verify ./internal/auth).
func BenchmarkVerify(b *testing.B) {
	for _, size := range []int{0, DefaultCacheSize} {
		b.Run(fmt.Sprintf("cache=%d", size), func(b *testing.B) {
			tok, _ := NewWithCache(testSecret, size)
			tokens := make([]string, 10000)
			for i := range tokens {
				tokens[i], _ = tok.Issue(int64(i+1), time.Hour)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := tok.Verify(tokens[i%len(tokens)]); err != nil {
						b.Fatal(err)
					}
					i += 7
				}
			})
		})
	}
}

// tokenStore is a cache of verified tokens as the benchmarks below drive
// it: the table Verify uses, or the LRU of strings it used before issue 43
// (hashicorp/golang-lru, JWT_CACHE_SIZE 65,536 then), side by side.
type tokenStore interface {
	get(token string) bool
	add(token string, user int64)
}

type lruStore struct {
	c *lru.Cache[string, lruEntry]
}

type lruEntry struct {
	user int64
	exp  time.Time
}

func (l lruStore) get(token string) bool { _, ok := l.c.Get(token); return ok }
func (l lruStore) add(token string, user int64) {
	l.c.Add(token, lruEntry{user: user, exp: time.Now().Add(time.Hour)})
}

type tableStore struct{ c *tokenCache }

func (t tableStore) get(token string) bool { _, _, ok := t.c.get(token); return ok }
func (t tableStore) add(token string, user int64) {
	now := time.Now()
	t.c.add(token, user, now.Add(time.Hour), now)
}

var stores = []struct {
	name string
	make func() tokenStore
}{
	{"lru-65536", func() tokenStore { c, _ := lru.New[string, lruEntry](65536); return lruStore{c} }},
	{"table-" + strconv.Itoa(DefaultCacheSize), func() tokenStore { return tableStore{newTokenCache(DefaultCacheSize)} }},
}

// realTokens are n tokens as Issue makes them, for users from 1,000,000.
func realTokens(n int) []string {
	tok, _ := NewWithCache(testSecret, 0)
	out := make([]string, n)
	for i := range out {
		out[i], _ = tok.Issue(int64(1000000+i), time.Hour)
	}
	return out
}

// filled is c with tokens remembered, each a copy (as an api's request
// header is), not a substring of the benchmark's own.
func filled(c tokenStore, tokens []string) tokenStore {
	for i, s := range tokens {
		c.add(strings.Clone(s), int64(i))
	}
	return c
}

// BenchmarkCacheMemory reports what one cached token costs the heap,
// the token string included (go test -run '^$' -bench CacheMemory
// ./internal/auth): 50,000 tokens remembered, each a copy of the request's
// header as an api holds it.
func BenchmarkCacheMemory(b *testing.B) {
	const n = 50000
	tokens := realTokens(n)
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c := filled(st.make(), tokens)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/entry")
				b.ReportMetric(float64(len(tokens[0])), "token-B")
				runtime.KeepAlive(c)
			}
		})
	}
}

// BenchmarkCacheGC reports what a full cache costs the garbage collector
// (go test -run '^$' -bench CacheGC ./internal/auth): 50,000 tokens
// remembered (each a copy, as an api's request header is), then one forced
// collection per b.N; ns/op is one collection's time, live-MB the heap the
// cache keeps. The api collects several times a second under load, and
// every collection marks what a cache holds that has pointers.
func BenchmarkCacheGC(b *testing.B) {
	const n = 50000
	tokens := realTokens(n)
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			var base runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&base)
			c := filled(st.make(), tokens)
			runtime.GC()
			var full runtime.MemStats
			runtime.ReadMemStats(&full)
			b.ResetTimer()
			for range b.N {
				runtime.GC()
			}
			b.StopTimer()
			b.ReportMetric(float64(full.HeapAlloc-base.HeapAlloc)/(1<<20), "live-MB")
			runtime.KeepAlive(c)
		})
	}
}

// BenchmarkCacheMiss: what a launch's shopper costs the cache — a token
// never seen looked up and missed, then remembered in a cache already full
// (go test -run '^$' -bench CacheMiss -benchmem ./internal/auth).
func BenchmarkCacheMiss(b *testing.B) {
	const n = 400000
	tokens := realTokens(n)
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			c := st.make()
			for i, s := range tokens[:n/2] {
				c.add(s, int64(i))
			}
			i := n / 2
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s := tokens[n/2+i%(n/2)]
				if i < n && c.get(s) {
					b.Fatal("a new token hit")
				}
				c.add(s, int64(i))
				i++
			}
		})
	}
}

// golangJWT verifies a token as Tokens did before 2026-11-30, with
// golang-jwt (its parser built once, the claims into the plain struct):
// the benchmarks' baseline, and TestVerify_agreesWithGolangJWT's peer.
type golangJWT struct {
	parser *gjwt.Parser
	keyFn  gjwt.Keyfunc
}

func newGolangJWT(secret string) golangJWT {
	key := any([]byte(secret))
	return golangJWT{
		parser: gjwt.NewParser(gjwt.WithValidMethods([]string{gjwt.SigningMethodHS256.Alg()}),
			gjwt.WithExpirationRequired(), gjwt.WithLeeway(leeway)),
		keyFn: func(*gjwt.Token) (any, error) { return key, nil },
	}
}

// verify is Tokens.verify as it was: the user id, or an error.
func (g golangJWT) verify(token string) (int64, error) {
	var c gjwtClaims
	if _, err := g.parser.ParseWithClaims(token, &c, g.keyFn); err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(c.Sub, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != c.Sub {
		return 0, fmt.Errorf("subject %q", c.Sub)
	}
	return id, nil
}

type gjwtClaims struct{ claims }

func gjwtDate(secs *float64) *gjwt.NumericDate {
	if secs == nil {
		return nil
	}
	whole, frac := math.Modf(*secs)
	return gjwt.NewNumericDate(time.Unix(int64(whole), int64(frac*1e9)))
}

func (c *gjwtClaims) GetExpirationTime() (*gjwt.NumericDate, error) { return gjwtDate(c.Exp), nil }
func (c *gjwtClaims) GetNotBefore() (*gjwt.NumericDate, error)      { return gjwtDate(c.Nbf), nil }
func (c *gjwtClaims) GetIssuedAt() (*gjwt.NumericDate, error)       { return nil, nil }
func (c *gjwtClaims) GetIssuer() (string, error)                    { return "", nil }
func (c *gjwtClaims) GetSubject() (string, error)                   { return c.Sub, nil }
func (c *gjwtClaims) GetAudience() (gjwt.ClaimStrings, error)       { return nil, nil }

// BenchmarkVerifyLibraries: a fresh token (the cache off: a shopper's first
// request at a launch) verified by Tokens with cristalhq/jwt, against the
// same checks with golang-jwt as before 2026-11-30 (go test -run '^$'
// -bench VerifyLibraries -benchmem ./internal/auth). 4,096 users' tokens in
// turn, so no one token's bytes stay in the CPU's cache.
func BenchmarkVerifyLibraries(b *testing.B) {
	tok, _ := NewWithCache(testSecret, 0)
	tokens := realTokens(4096)
	g := newGolangJWT(testSecret)
	b.Run("cristalhq-jwt (ours)", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, err := tok.verify(tokens[i%len(tokens)], time.Now()); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("golang-jwt (before)", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := g.verify(tokens[i%len(tokens)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// len counts the entries the cache holds.
func (c *tokenCache) len() int {
	n := 0
	for i := range c.sets {
		s := &c.sets[i]
		s.mu.Lock()
		for j := range s.ways {
			if s.ways[j].hash != 0 {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// fakeToken is a token-shaped string of n: three segments, the last 43
// characters, as the cache keys them (it is never verified here).
func fakeToken(n int) string {
	return fmt.Sprintf("eyJhbGciOiJIUzI1NiJ9.%016x.%043d", n, n)
}

// A crowd of 50,000 shoppers cycling through their tokens, in a cache of
// the default size: after the first round nearly every request hits,
// where a cache whose sets overflow would miss on the overflowing sets'
// every request if it replaced the oldest entry.
func TestTokenCache_hitRate(t *testing.T) {
	c := newTokenCache(DefaultCacheSize)
	const crowd = 50000
	exp, now := time.Now().Add(time.Hour), time.Now()
	hits, total := 0, 0
	for round := range 4 {
		for i := range crowd {
			tok := fakeToken(i)
			user, _, ok := c.get(tok)
			if ok && user != int64(i) {
				t.Fatalf("token %d answered as user %d", i, user)
			}
			if !ok {
				c.add(tok, int64(i), exp, now)
			}
			if round > 0 {
				total++
				if ok {
					hits++
				}
			}
		}
	}
	rate := float64(hits) / float64(total)
	t.Logf("%d tokens in %d entries: %.2f%% of the requests after the first round hit", crowd, len(c.sets)*cacheWays, 100*rate)
	if rate < 0.97 {
		t.Fatalf("hit rate %.3f, want at least 0.97", rate)
	}
	// A crowd five times the cache's size still hits on some, and never
	// answers a token as another's.
	small := newTokenCache(8 * 64)
	for range 3 {
		for i := range 5 * 8 * 64 {
			tok := fakeToken(i)
			if user, _, ok := small.get(tok); ok && user != int64(i) {
				t.Fatalf("token %d answered as user %d", i, user)
			} else if !ok {
				small.add(tok, int64(i), exp, now)
			}
		}
	}
	if n := small.len(); n != 8*64 {
		t.Fatalf("a full cache holds %d entries, want %d", n, 8*64)
	}
}

// Expired entries make room first; a token remembered again takes its own
// entry, not a second one; tokens of other shapes are not remembered.
func TestTokenCache_replacement(t *testing.T) {
	c := newTokenCache(cacheWays) // one set
	now := time.Now()
	for i := range cacheWays {
		exp := now.Add(time.Hour)
		if i == 5 {
			exp = now.Add(-leeway - time.Second)
		}
		c.add(fakeToken(i), int64(i), exp, now)
	}
	c.add(fakeToken(3), 3, now.Add(2*time.Hour), now)
	if n := c.len(); n != cacheWays {
		t.Fatalf("%d entries after remembering one again, want %d", n, cacheWays)
	}
	c.add(fakeToken(100), 100, now.Add(time.Hour), now)
	if _, _, ok := c.get(fakeToken(5)); ok {
		t.Fatal("the expired entry stayed while a live one went")
	}
	for _, i := range []int{0, 1, 2, 3, 4, 6, 7, 100} {
		if user, _, ok := c.get(fakeToken(i)); !ok || user != int64(i) {
			t.Fatalf("token %d: %d %v", i, user, ok)
		}
	}
	for _, odd := range []string{"", "no-dots", "a.b.short", fakeToken(1) + "x"} {
		c.add(odd, 9, now.Add(time.Hour), now)
		if _, _, ok := c.get(odd); ok {
			t.Fatalf("%q was remembered", odd)
		}
	}
}

// Many goroutines verifying their own users' tokens through a cache far
// smaller than them: each always gets its own user.
func TestTokenCache_concurrent(t *testing.T) {
	tok, _ := NewWithCache(testSecret, 64)
	tokens := make([]string, 512)
	for i := range tokens {
		tokens[i], _ = tok.Issue(int64(i+1), time.Hour)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for n := range 4000 {
				i := (n*7 + g*131) % len(tokens)
				if id, err := tok.Verify(tokens[i]); err != nil || id != int64(i+1) {
					errs <- fmt.Errorf("token of user %d: %d, %v", i+1, id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if hits, _ := tok.CacheStats(); hits == 0 {
		t.Fatal("no verification was answered by the cache")
	}
}

// The table holds no pointer: the collector never scans it, however full.
func TestTokenCache_holdsNoPointers(t *testing.T) {
	var walk func(reflect.Type) bool
	walk = func(ty reflect.Type) bool {
		switch ty.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.String, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			return true
		case reflect.Array:
			return walk(ty.Elem())
		case reflect.Struct:
			for i := range ty.NumField() {
				if walk(ty.Field(i).Type) {
					return true
				}
			}
		}
		return false
	}
	if walk(reflect.TypeFor[tokenSet]()) {
		t.Fatal("tokenSet holds a pointer")
	}
	if size := reflect.TypeFor[tokenEntry]().Size(); size != 72 {
		t.Fatalf("an entry is %d bytes, the docs say 72", size)
	}
}

// Verify accepts and refuses what golang-jwt, which verified the tokens
// before 2026-11-30, accepted and refused: tokens of every kind a client
// could send (FuzzVerify bends them further), each checked by both.
func TestVerify_agreesWithGolangJWT(t *testing.T) {
	tok, _ := NewWithCache(testSecret, 0)
	peer := newGolangJWT(testSecret)
	key := []byte(testSecret)
	sign := func(m gjwt.SigningMethod, key any, claims gjwt.Claims) string {
		s, err := gjwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	at := func(d time.Duration) *gjwt.NumericDate { return gjwt.NewNumericDate(now.Add(d)) }
	good, _ := tok.Issue(42, time.Hour)
	parts := strings.Split(good, ".")
	cases := map[string]string{
		"ours":             good,
		"expired":          sign(gjwt.SigningMethodHS256, key, gjwt.RegisteredClaims{Subject: "7", ExpiresAt: at(-time.Minute)}),
		"expired 3 s ago":  sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "7", "exp": now.Add(-3 * time.Second).Unix()}),
		"expired 6 s ago":  sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "7", "exp": now.Add(-6 * time.Second).Unix()}),
		"no expiry":        sign(gjwt.SigningMethodHS256, key, gjwt.RegisteredClaims{Subject: "7"}),
		"expiry a string":  sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "7", "exp": "9999999999"}),
		"expiry null":      sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "7", "exp": nil}),
		"not before 1h":    sign(gjwt.SigningMethodHS256, key, gjwt.RegisteredClaims{Subject: "7", ExpiresAt: at(2 * time.Hour), NotBefore: at(time.Hour)}),
		"not before 3 s":   sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "7", "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(3 * time.Second).Unix()}),
		"fractional":       sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "7", "exp": float64(now.Add(time.Hour).UnixMilli()) / 1000}),
		"subject a number": sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": 7, "exp": now.Add(time.Hour).Unix()}),
		"subject 007":      sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "007", "exp": now.Add(time.Hour).Unix()}),
		"subject 0":        sign(gjwt.SigningMethodHS256, key, gjwt.MapClaims{"sub": "0", "exp": now.Add(time.Hour).Unix()}),
		"issuer, audience": sign(gjwt.SigningMethodHS256, key, gjwt.RegisteredClaims{Subject: "7", ExpiresAt: at(time.Hour), Issuer: "x", Audience: gjwt.ClaimStrings{"a"}}),
		"HS384":            sign(gjwt.SigningMethodHS384, key, gjwt.RegisteredClaims{Subject: "7", ExpiresAt: at(time.Hour)}),
		"HS512":            sign(gjwt.SigningMethodHS512, key, gjwt.RegisteredClaims{Subject: "7", ExpiresAt: at(time.Hour)}),
		"alg none":         sign(gjwt.SigningMethodNone, gjwt.UnsafeAllowNoneSignatureType, gjwt.RegisteredClaims{Subject: "7", ExpiresAt: at(time.Hour)}),
		"another secret":   sign(gjwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), gjwt.RegisteredClaims{Subject: "7", ExpiresAt: at(time.Hour)}),
		"signature cut":    parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-2],
		"no signature":     parts[0] + "." + parts[1] + ".",
		"four parts":       good + ".x",
		// The claims' base64 ends in bits no byte uses: a last character
		// that differs only there decodes to the same bytes, which both
		// libraries take (neither decodes strictly), signature and all.
		"claims' spare bits": parts[0] + "." + parts[1][:len(parts[1])-1] + "Q." + parts[2],
		"claims tampered":    parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","exp":9999999999}`)) + "." + parts[2],
		"empty":              "",
		"garbage":            "not.a.token",
	}
	accepted := 0
	for name, s := range cases {
		id, err := tok.Verify(s)
		pid, perr := peer.verify(s)
		if (err == nil) != (perr == nil) || id != pid {
			t.Errorf("%s: %d/%v here, %d/%v by golang-jwt", name, id, err, pid, perr)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, not ErrInvalid", name, err)
		}
		if err == nil {
			accepted++
		}
	}
	// ours, its spare bits, 3 s ago (leeway 5 s), not before 3 s (leeway),
	// fractional, issuer and audience (unchecked): a check that cannot
	// fail both ways would not see these.
	if accepted != 6 {
		t.Errorf("%d of the cases accepted, want 6", accepted)
	}
}
