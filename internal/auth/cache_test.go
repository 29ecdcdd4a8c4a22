package auth

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
	if v, ok := tok.cache.Get(good); !ok || v.user != 42 {
		t.Fatalf("a verified token was not remembered: %+v %v", v, ok)
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

	// An entry whose token has expired beyond the leeway is not trusted: the
	// token is verified afresh, refused, and dropped from the cache.
	expired, _ := tok.Issue(43, -time.Minute)
	tok.cache.Add(expired, verified{user: 43, exp: time.Now().Add(-leeway - time.Millisecond)})
	if id, err := tok.Verify(expired); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expired token served from the cache: %d, %v", id, err)
	}
	if tok.cache.Contains(expired) {
		t.Fatal("expired entry kept")
	}
	// Refused tokens are never remembered.
	if tok.cache.Contains(swapped) {
		t.Fatal("a refused token was remembered")
	}

	// Bounded: the oldest entries go.
	for i := range 20 {
		s, _ := tok.Issue(int64(100+i), time.Hour)
		if id, err := tok.Verify(s); err != nil || id != int64(100+i) {
			t.Fatalf("token %d: %d, %v", i, id, err)
		}
	}
	if n := tok.cache.Len(); n != 8 {
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

// BenchmarkCacheMemory reports what one cached token costs on the heap
// beyond the token string itself (go test -run '^$' -bench CacheMemory
// ./internal/auth): 50,000 tokens verified into a cache of the default size.
func BenchmarkCacheMemory(b *testing.B) {
	const n = 50000
	for range b.N {
		tok, _ := NewWithCache(testSecret, DefaultCacheSize)
		tokens := make([]string, n)
		for i := range tokens {
			tokens[i], _ = tok.Issue(int64(1000000+i), time.Hour)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, s := range tokens {
			if _, err := tok.Verify(s); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/entry")
		b.ReportMetric(float64(len(tokens[0])), "token-B")
		runtime.KeepAlive(tok)
	}
}

// BenchmarkCacheGC reports what a full cache costs the garbage collector
// (go test -run '^$' -bench CacheGC ./internal/auth): 50,000 tokens
// verified into a cache of the default size, the tokens then dropped by
// the caller (as an api drops each request's header), then one forced
// collection per b.N; ns/op is one collection's time, live-MB the heap
// the cache keeps. The api collects several times a second under load,
// and every collection marks what the cache holds.
func BenchmarkCacheGC(b *testing.B) {
	const n = 50000
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	tok, _ := NewWithCache(testSecret, DefaultCacheSize)
	for i := range n {
		s, _ := tok.Issue(int64(1000000+i), time.Hour)
		if _, err := tok.Verify(s); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	var full runtime.MemStats
	runtime.ReadMemStats(&full)
	b.ResetTimer()
	for range b.N {
		runtime.GC()
	}
	b.StopTimer()
	b.ReportMetric(float64(full.HeapAlloc-base.HeapAlloc)/(1<<20), "live-MB")
	runtime.KeepAlive(tok)
}

// BenchmarkVerifyParser: a fresh token (the cache off) verified with the
// parser built once, against a parser built for each verification with its
// options, as before 2026-11-29 (go test -run '^$' -bench VerifyParser
// -benchmem ./internal/auth).
func BenchmarkVerifyParser(b *testing.B) {
	tok, _ := NewWithCache(testSecret, 0)
	s, _ := tok.Issue(42, time.Hour)
	b.Run("built once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := tok.verify(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("built per call (before)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var claims jwt.RegisteredClaims
			_, err := jwt.ParseWithClaims(s, &claims, func(*jwt.Token) (any, error) { return tok.secret, nil },
				jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(), jwt.WithLeeway(leeway))
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkVerifyClaims: a fresh token (the cache off) verified into the
// plain claims verify reads, against jwt.RegisteredClaims, as before
// 2026-11-30 (go test -run '^$' -bench VerifyClaims -benchmem ./internal/auth).
func BenchmarkVerifyClaims(b *testing.B) {
	tok, _ := NewWithCache(testSecret, 0)
	s, _ := tok.Issue(42, time.Hour)
	b.Run("claims", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := tok.verify(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RegisteredClaims (before)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var claims jwt.RegisteredClaims
			if _, err := tok.parser.ParseWithClaims(s, &claims, tok.keyFn); err != nil {
				b.Fatal(err)
			}
		}
	})
}
