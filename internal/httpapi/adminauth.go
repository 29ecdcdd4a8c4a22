package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"math"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/flashsale/flashsale/internal/httperr"
)

// AdminLimit bounds the failed attempts at the admin token of one client
// network (an IPv4 address, an IPv6 /64, as the per-IP limit counts them):
// Burst of them, then one every Every. A network out of attempts is
// answered 429 RATE_LIMITED with Retry-After before its token is looked
// at, the right token included: otherwise the 429s would only tell a
// guesser which guesses were wrong. A request with the right token costs
// nothing. The zero value gives the defaults in the comments.
//
// The state is this process's, in memory (golang.org/x/time/rate, a limiter
// per network, in a bounded LRU), not Redis's: the admin API needs no
// second round trip for it, keeps guarding when Redis is away, and a
// budget per minute is not one redisstore.Limiter can express (its budget
// is whole requests a second). With several replicas behind a proxy a
// network's budget is per replica.
type AdminLimit struct {
	// Burst is how many failed attempts a network may make in a row.
	// Default 10.
	Burst int
	// Every is how long a network waits for each further attempt once its
	// burst is spent. Default 6s: 10 a minute.
	Every time.Duration
	// Networks bounds the networks remembered, the least recently seen
	// going first (about 250 bytes each). Default 10,000.
	Networks int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// adminGuard admits requests carrying "Authorization: Bearer <token>" (the
// scheme in any case).
type adminGuard struct {
	// digest is the token's SHA-256; the token itself is not kept.
	digest [sha256.Size]byte
	closed bool // no token configured: every request is refused
	limit  AdminLimit
	// attempts holds each network's budget of failed attempts.
	attempts *lru.Cache[string, *rate.Limiter]
}

func newAdminGuard(token string, l AdminLimit) *adminGuard {
	if l.Burst <= 0 {
		l.Burst = 10
	}
	if l.Every <= 0 {
		l.Every = 6 * time.Second
	}
	if l.Networks <= 0 {
		l.Networks = 10_000
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	attempts, _ := lru.New[string, *rate.Limiter](l.Networks) // only a size below 1 is an error
	return &adminGuard{digest: sha256.Sum256([]byte(token)), closed: token == "", limit: l, attempts: attempts}
}

// matches says whether got is the token, by comparing their SHA-256
// digests in constant time. Digests are always 32 bytes, so the time taken
// tells neither the token's length (subtle.ConstantTimeCompare returns at
// once for inputs of different lengths) nor how much of it got has right.
func (g *adminGuard) matches(got string) bool {
	d := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(d[:], g.digest[:]) == 1
}

// middleware refuses a request without the token: 401 UNAUTHENTICATED, or
// 429 RATE_LIMITED while the client's network has no attempt left.
func (g *adminGuard) middleware(c *gin.Context) {
	if g.closed {
		httperr.Write(c, httperr.New(httperr.Unauthenticated, "the admin API is disabled: ADMIN_TOKEN is not set"))
		return
	}
	network := ipKey(c.ClientIP())
	lim, ok := g.attempts.Get(network)
	if !ok {
		fresh := rate.NewLimiter(rate.Every(g.limit.Every), g.limit.Burst)
		if lim, ok, _ = g.attempts.PeekOrAdd(network, fresh); !ok { // another request's, if it came first
			lim = fresh
		}
	}
	// An attempt takes its place in the budget before the token is looked
	// at, so concurrent guesses cannot all pass one check; one that had to
	// wait is refused and gives its place back, one with the right token
	// gives it back too.
	now := g.limit.Now()
	r := lim.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		secs := int(math.Ceil(wait.Seconds()))
		c.Header("Retry-After", strconv.Itoa(secs))
		httperr.Write(c, httperr.New(httperr.RateLimited,
			"too many failed admin sign-ins from this network; try again in %d s", secs))
		return
	}
	got, ok := bearerToken(c.GetHeader("Authorization"))
	if !ok || !g.matches(got) {
		httperr.Write(c, httperr.New(httperr.Unauthenticated, "a valid admin bearer token is required"))
		return
	}
	r.CancelAt(now)
	c.Next()
}
