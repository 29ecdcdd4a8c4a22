package lock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

type ownerKey struct{}

// WithOwner returns a context carrying owner id as the owner of the reentrant
// locks obtained with it. Go has no thread identity, so the owner travels in
// the context; any string works (a request id, a job id), and whoever carries
// it is the owner, in this process or another.
func WithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerFrom returns the owner id WithOwner put in ctx.
func OwnerFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(ownerKey{}).(string)
	return id, ok && id != ""
}

// Reentrant is the reentrant lock: a Redis hash of owner → hold count. An
// owner that holds a key obtains it again at once (count+1, ttl refreshed);
// each Release drops one hold and the last deletes it. Nested holds share one
// fence, one watchdog and one Lost channel. A Release by anyone but the owner
// fails with ErrNotHeld and changes nothing.
//
// Obtain with a context from WithOwner; without one, a new owner id is minted
// and returned by Lock.Owner, to be put in the context for nested obtains.
type Reentrant struct {
	c *Client

	mu    sync.Mutex
	holds map[reentrantKey]*reentrantHold // this process's live holds
}

type reentrantKey struct{ key, owner string }

// Reentrant returns the client's reentrant lock. It shares the client's Redis
// connection, release subscription and Config.
func (c *Client) Reentrant() *Reentrant {
	c.reentrantOnce.Do(func() {
		c.reentrant = &Reentrant{c: c, holds: make(map[reentrantKey]*reentrantHold)}
	})
	return c.reentrant
}

// TryObtain makes one attempt: it returns an error wrapping ErrNotObtained
// when another owner holds key.
func (r *Reentrant) TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer r.c.cfg.timeObtain("reentrant", opts, time.Now(), &l, &err)
	o, err := r.c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	l, pttl, err := r.attempt(ctx, key, ownerOf(ctx), ttl, o)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, notObtained(key, pttl)
	}
	return l, nil
}

// Obtain takes key for ttl, waiting as long as ctx allows when another owner
// holds it. When ctx ends first it returns an error wrapping ErrCanceled.
//
// Unlike the mutex there is no local queue: the owner's own obtains must
// never wait behind its hold, so every waiter listens for release notices
// itself.
func (r *Reentrant) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer r.c.cfg.timeObtain("reentrant", opts, time.Now(), &l, &err)
	o, err := r.c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	owner := ownerOf(ctx)
	return r.c.waitFor(ctx, newReentrantKeys(r.c.cfg.Prefix, key).channel, func() (*Lock, int64, error) {
		return r.attempt(ctx, key, owner, ttl, o)
	})
}

func ownerOf(ctx context.Context) string {
	if id, ok := OwnerFrom(ctx); ok {
		return id
	}
	return newToken()
}

// attempt runs the obtain script once.
func (r *Reentrant) attempt(ctx context.Context, key, owner string, ttl time.Duration, o options) (*Lock, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, canceled(err)
	}
	keys := newReentrantKeys(r.c.cfg.Prefix, key)
	nonce := newToken()
	sent := time.Now()
	meta := r.c.pid + metaSep + strconv.FormatInt(sent.UnixMilli(), 10) + metaSep + r.c.cfg.Host + metaSep + o.label
	res, err := reentrantObtainScript.Run(ctx, r.c.rdb, []string{keys.lock, keys.fence},
		"o:"+owner, ttl.Milliseconds(), r.c.cfg.FenceRetention.Milliseconds(), meta, nonce).Int64Slice()
	if err != nil {
		// Its answer lost, the script may have added this hold: drop it
		// (only it: the nonce names it).
		go r.releaseOne(keys, owner, nonce)
		if ended(ctx) {
			return nil, 0, canceled(ctxErr(ctx))
		}
		return nil, 0, unavailable("obtain", err)
	}
	if len(res) != 3 {
		return nil, 0, fmt.Errorf("lock: reentrant obtain script returned %v", res)
	}
	if res[0] == 0 {
		r.c.cfg.observer("reentrant", o).contended()
		return nil, res[1], nil
	}
	if late(sent, ttl.Milliseconds()) {
		go r.releaseOne(keys, owner, nonce)
		return nil, 0, nil
	}

	rk := reentrantKey{key, owner}
	fence := res[1]
	r.mu.Lock()
	h := r.holds[rk]
	if h != nil && h.fence != fence {
		// Redis has a different hold of ours than the one we knew: that
		// one expired.
		go h.lease.markLost()
		h = nil
	}
	if h == nil {
		h = &reentrantHold{r: r, rk: rk, keys: keys, fence: fence}
		h.lease = startLease(h, r.c.cfg.observer("reentrant", o), ttl, o, sent, nil)
		r.holds[rk] = h
	}
	h.local++
	l := &Lock{since: time.Now(), key: key, owner: owner, token: nonce, fence: h.fence, lost: h.lease.lost, lease: h.lease, hold: h}
	r.mu.Unlock()
	return l, 0, nil
}

// releaseOne drops one hold, named by its nonce, in the background (cleaning
// up after an obtain whose answer was lost or late).
func (r *Reentrant) releaseOne(keys reentrantKeys, owner, nonce string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = reentrantReleaseScript.Run(ctx, r.c.rdb, []string{keys.lock}, "o:"+owner, keys.channel, nonce).Err()
}

// reentrantHold is one owner's hold of one key in this process, shared by its
// nested Locks.
type reentrantHold struct {
	r     *Reentrant
	rk    reentrantKey
	keys  reentrantKeys
	fence int64
	lease *lease
	local int // Locks not yet released; guarded by r.mu
}

func (h *reentrantHold) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := reentrantRefreshScript.Run(ctx, h.r.c.rdb, []string{h.keys.lock}, "o:"+h.rk.owner, ttl.Milliseconds(),
		strconv.FormatInt(h.fence, 10)).Int64()
	return n == 1, err
}

// release is Lock.Release for one nested hold.
func (h *reentrantHold) release(ctx context.Context, l *Lock) error {
	h.r.mu.Lock()
	h.local--
	last := h.local == 0
	if last && h.r.holds[h.rk] == h {
		delete(h.r.holds, h.rk)
	}
	h.r.mu.Unlock()
	if last {
		if err := h.lease.stop(ctx); err != nil {
			return err
		}
	}
	n, err := reentrantReleaseScript.Run(ctx, h.r.c.rdb, []string{h.keys.lock}, "o:"+h.rk.owner, h.keys.channel, l.token).Int64()
	if err != nil {
		if ended(ctx) {
			return canceled(ctxErr(ctx))
		}
		return unavailable("release", err)
	}
	if n < 0 {
		h.lease.markLost()
		return ErrNotHeld
	}
	if l.isLost() {
		return ErrNotHeld
	}
	return nil
}

// Holder reports who holds the reentrant lock key and how many
// holds it has, or ErrNotHeld.
func (r *Reentrant) Holder(ctx context.Context, key string) (Holder, error) {
	if err := validateKey(key); err != nil {
		return Holder{}, err
	}
	k := newReentrantKeys(r.c.cfg.Prefix, key).lock
	var fields *redis.MapStringStringCmd
	var pttl *redis.DurationCmd
	_, err := r.c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, k)
		pttl = p.PTTL(ctx, k)
		return nil
	})
	if err != nil {
		return Holder{}, unavailable("inspect", err)
	}
	m := fields.Val()
	if len(m) == 0 {
		return Holder{}, ErrNotHeld
	}
	h := Holder{TTL: pttl.Val()}
	h.setMeta(m["~meta"])
	h.Fence, _ = strconv.ParseInt(m["~fence"], 10, 64)
	for f, v := range m {
		if owner, ok := strings.CutPrefix(f, "o:"); ok {
			// (n:<nonce> fields name the holds; the count is in o:<owner>)
			h.Owner = owner[:min(8, len(owner))]
			h.Count, _ = strconv.Atoi(v)
		}
	}
	return h, nil
}
