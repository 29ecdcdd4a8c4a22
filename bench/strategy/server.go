package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
)

// The comparison server: the rows that are not our api, in a gin process
// like it (release mode, recovery, no request log).
//
//	/hello                   a gin hello: the ceiling of any endpoint here
//	POST /bare/:id           (a) one Lua decrement of a counter: one Redis round trip, no auth
//	POST /seed/:id/orders    (d) the seed recipe: SETNX lock with a 10 ms sleep-retry
//	                             around read-check-write (lockedReserver, seedrecipe.go)
//	POST /fair/:id/orders    (e) the same recipe under our fair (FIFO) lock
//
// (d) and (e) verify the JWT and read the JSON body as our api does, and
// keep their books in the activity's own stock and users keys
// (rediskeys.For), so the same figures check them, plus a record of the
// orders they took in a key of the benchmark's own, in the activity's slot
// (reservedKey, bench:{act:<id>}:reserved, seedrecipe.go).

// bareKey is (a)'s counter for activity id.
func bareKey(id string) string { return "bench:{act:" + id + "}:bare" }

// bareDecr takes one unit if there is one: 1 taken, 0 none left.
var bareDecr = redis.NewScript(`
if tonumber(redis.call('GET', KEYS[1]) or '0') <= 0 then return 0 end
redis.call('DECR', KEYS[1])
return 1`)

// seedLock is the seed articles' lock: SET key token NX PX ttl, retried after
// a fixed sleep while it fails; released by a compare-and-delete script.
type seedLock struct {
	rdb   *redis.Client
	sleep time.Duration
}

var seedRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func (s seedLock) Acquire(ctx context.Context, key string, ttl time.Duration) (func(), <-chan struct{}, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	key = "seed:" + key
	for {
		ok, err := s.rdb.SetNX(ctx, key, token, ttl).Result()
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return func() { seedRelease.Run(context.WithoutCancel(ctx), s.rdb, []string{key}, token) }, nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(s.sleep):
		}
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	redisURL := fs.String("redis", "", "redis URL")
	secret := fs.String("jwt-secret", "", "JWT secret")
	_ = fs.Parse(args)
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return err
	}
	opt.PoolSize = 256
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	tokens, err := auth.New(*secret)
	if err != nil {
		return err
	}
	locks := lock.New(rdb)
	defer locks.Close()
	seed := newLockedReserver(rdb, seedLock{rdb: rdb, sleep: 10 * time.Millisecond})
	fair := newLockedReserver(rdb, withLocker(locks.Fair()))

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.Any("/hello", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"hello": "world"}) })
	r.POST("/bare/:id", func(c *gin.Context) {
		n, err := bareDecr.Run(c, rdb, []string{bareKey(c.Param("id"))}).Int()
		switch {
		case err != nil:
			c.JSON(http.StatusServiceUnavailable, gin.H{"error": gin.H{"code": "UNAVAILABLE"}})
		case n == 0:
			c.JSON(http.StatusConflict, gin.H{"error": gin.H{"code": "SOLD_OUT"}})
		default:
			c.JSON(http.StatusAccepted, gin.H{"ok": true})
		}
	})
	recipe := func(lr *lockedReserver) gin.HandlerFunc {
		return func(c *gin.Context) {
			user, err := tokens.Verify(strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer "))
			if err != nil {
				c.JSON(http.StatusUnauthorized, gin.H{"error": gin.H{"code": "UNAUTHENTICATED"}})
				return
			}
			var body struct {
				Quantity int `json:"quantity"`
			}
			id, err := strconv.ParseInt(c.Param("id"), 10, 64)
			if err != nil || c.ShouldBindJSON(&body) != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": gin.H{"code": "INVALID_ARGUMENT"}})
				return
			}
			no := order.NewNo(id)
			_, err = lr.Reserve(c, id, user, body.Quantity, no)
			switch {
			case err == nil:
				c.JSON(http.StatusAccepted, gin.H{"order_no": no})
			case errors.Is(err, activity.ErrSoldOut):
				c.JSON(http.StatusConflict, gin.H{"error": gin.H{"code": "SOLD_OUT"}})
			case errors.Is(err, activity.ErrLimitExceeded):
				c.JSON(http.StatusConflict, gin.H{"error": gin.H{"code": "LIMIT_EXCEEDED"}})
			default:
				c.JSON(http.StatusServiceUnavailable, gin.H{"error": gin.H{"code": "UNAVAILABLE", "message": err.Error()}})
			}
		}
	}
	r.POST("/seed/:id/orders", recipe(seed))
	r.POST("/fair/:id/orders", recipe(fair))

	srv := &http.Server{Addr: *addr, Handler: r}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
