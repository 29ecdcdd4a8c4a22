package redisstore

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Seed keys → run a script → compare its reply and every key in Redis
// afterwards. Times the scripts take from Redis TIME are compared to the
// moment the case started ("now"), to the second.

// state is a comparable picture of every key in Redis: its type-aware,
// normalised value and its ttl rounded to seconds (or "persist").
type state map[string]string

// at is a time relative to the case's start: a seed writes it as unix ms,
// a state or a reply shows it as "now+Ns" / "now-Ns".
type at time.Duration

func (a at) String() string { return rel(time.Duration(a).Milliseconds()) }

func rel(ms int64) string {
	s := int64(math.Round(float64(ms) / 1000))
	if s < 0 {
		return fmt.Sprintf("now%ds", s)
	}
	return fmt.Sprintf("now+%ds", s)
}

// near: n is a ms timestamp within a day of base.
func near(n, base int64) bool { return n > base-86_400_000 && n < base+86_400_000 }

var entryID = regexp.MustCompile(`^(\d+)-(\d+)$`)

// norm turns a ms timestamp near base into "now±Ns" and a stream entry id
// made at such a time into "<entry>", or "<gone entry>" when live (the ids
// in Redis's streams, if known) lacks it; seeded ids such as "1-1" stay.
func norm(s string, base int64, live ...map[string]bool) string {
	if m := entryID.FindStringSubmatch(s); m != nil {
		if ms, err := strconv.ParseInt(m[1], 10, 64); err == nil && near(ms, base) {
			if len(live) > 0 && !live[0][s] {
				return "<gone entry>"
			}
			return "<entry>"
		}
		return s
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && near(n, base) {
		return rel(n - base)
	}
	return s
}

func normReply(v any, base int64) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = normReply(v[i], base)
		}
		return out
	case int64:
		if near(v, base) {
			return rel(v - base)
		}
	case string:
		return norm(v, base)
	}
	return v
}

func snapshot(t *testing.T, rdb *redis.Client, base int64) state {
	t.Helper()
	ctx := context.Background()
	out := state{}
	keys := rdb.Keys(ctx, "*").Val()
	live := map[string]bool{}
	for _, k := range keys {
		if rdb.Type(ctx, k).Val() == "stream" {
			for _, e := range rdb.XRange(ctx, k, "-", "+").Val() {
				live[e.ID] = true
			}
		}
	}
	for _, k := range keys {
		var v string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			v = norm(rdb.Get(ctx, k).Val(), base, live)
		case "hash":
			f := fields{}
			for name, val := range rdb.HGetAll(ctx, k).Val() {
				f[name] = norm(val, base, live)
			}
			v = f.render()
		case "zset":
			var ms []string
			for _, z := range rdb.ZRangeWithScores(ctx, k, 0, -1).Val() {
				ms = append(ms, fmt.Sprint(z.Member)+"@"+norm(strconv.FormatFloat(z.Score, 'f', -1, 64), base))
			}
			v = "zset[" + strings.Join(ms, " ") + "]"
		case "set":
			ms := rdb.SMembers(ctx, k).Val()
			sort.Strings(ms)
			v = "set[" + strings.Join(ms, " ") + "]"
		case "stream":
			var es []string
			for _, e := range rdb.XRange(ctx, k, "-", "+").Val() {
				f := fields{}
				for name, val := range e.Values {
					f[name] = norm(fmt.Sprint(val), base)
				}
				es = append(es, norm(e.ID, base)+" "+strings.TrimSuffix(strings.TrimPrefix(f.render(), "hash{"), "}"))
			}
			v = "stream[" + strings.Join(es, "; ") + "]"
		default:
			t.Fatalf("snapshot: key %s has type %s", k, typ)
		}
		out[k] = v + " " + ttlOf(rdb.PTTL(ctx, k).Val())
	}
	return out
}

func ttlOf(ttl time.Duration) string {
	if ttl < 0 {
		return persist
	}
	return fmt.Sprintf("ttl~%ds", (ttl.Milliseconds()+500)/1000)
}

// seed runs Redis commands, writing each at argument as base+offset ms.
func seed(t *testing.T, rdb *redis.Client, base int64, cmds [][]any) {
	t.Helper()
	for _, c := range cmds {
		args := slices.Clone(c)
		for i, a := range args {
			if d, ok := a.(at); ok {
				args[i] = strconv.FormatInt(base+time.Duration(d).Milliseconds(), 10)
			}
		}
		if err := rdb.Do(context.Background(), args...).Err(); err != nil {
			t.Fatalf("seed %v: %v", c, err)
		}
	}
}

// fields is a hash's fields: seeded with hset, expected with hash.
type fields map[string]any

func (f fields) with(kv ...any) fields {
	out := fields{}
	for name, v := range f {
		out[name] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func (f fields) names() []string {
	names := make([]string, 0, len(f))
	for name := range f {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (f fields) render() string {
	var b []string
	for _, name := range f.names() {
		b = append(b, name+"="+fmt.Sprint(f[name]))
	}
	return "hash{" + strings.Join(b, " ") + "}"
}

// hash is the state of a hash holding f, with ttl.
func (f fields) hash(ttl string) string { return f.render() + " " + ttl }

// hset seeds key with f (fields in name order), kept for ttl ms if ttl > 0.
func (f fields) hset(key string, ttl int64) [][]any {
	cmd := []any{"HSET", key}
	for _, name := range f.names() {
		cmd = append(cmd, name, f[name])
	}
	if ttl > 0 {
		return [][]any{cmd, {"PEXPIRE", key, ttl}}
	}
	return [][]any{cmd}
}

func zsetOf(ttl string, memberScore ...any) string {
	var ms []string
	for i := 0; i < len(memberScore); i += 2 {
		ms = append(ms, fmt.Sprint(memberScore[i])+"@"+fmt.Sprint(memberScore[i+1]))
	}
	return "zset[" + strings.Join(ms, " ") + "] " + ttl
}

func streamOf(ttl string, entries ...string) string {
	return "stream[" + strings.Join(entries, "; ") + "] " + ttl
}

func join(cmds ...[][]any) [][]any { return slices.Concat(cmds...) }

func merge(states ...state) state {
	out := state{}
	for _, s := range states {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

const (
	persist   = "persist"
	no0       = "1-AAAAAAAAAAAAAAAA"
	no1       = "1-BBBBBBBBBBBBBBBB"
	no2       = "1-CCCCCCCCCCCCCCCC"
	gid       = "1-GGGGGGGGGGGGGGGG"
	gid2      = "1-HHHHHHHHHHHHHHHH"
	retention = int64(7 * 24 * time.Hour / time.Millisecond)
	kept      = "ttl~604800s" // an order or group record, kept for retention
	saleTTLms = int64(2 * time.Hour / time.Millisecond)
	saleTTL   = "ttl~7200s" // the sale's keys, as load.lua expires them
	idemTTLms = int64(24 * time.Hour / time.Millisecond)
	idemKept  = "ttl~86400s" // an Idempotency-Key, remembered idemTTLms
	// A sale loaded with keep_ms and expire_at_ms (loaded): its records are
	// kept keepMs, not the scripts' fallback (retention), and a key a
	// script creates expires at expire_at_ms, saleEnd from now. saleEnd is
	// not the seeded keys' ttl (load.lua makes them one): a key given the
	// meta's own ttl, or the fallback, shows.
	keepMs     = int64(3 * 24 * time.Hour / time.Millisecond)
	keptByMeta = "ttl~259200s"
	saleEnd    = at(90 * time.Minute)
	saleEndTTL = "ttl~5400s"
)

var act = rediskeys.For(1)

// flashMeta is a published flash sale, open for an hour either side of now.
func flashMeta() fields {
	return fields{
		"status": "published", "starts_ms": at(-time.Hour), "ends_ms": at(time.Hour), "limit": 2, "total": 10,
		"price": 1999, "pay_ttl_ms": 60000, "type": "seckill", "group_size": 0, "group_ttl_ms": 0,
		"accepted": 0, "returned": 0,
	}
}

// groupMeta is a published group buy: groups of 2, ten minutes to form.
func groupMeta() fields {
	return flashMeta().with("price", 999, "type", "groupbuy", "group_size", 2, "group_ttl_ms", 600000)
}

// loaded is meta as load.lua now writes it: with keep_ms, expire_at_ms and
// version. Without them (flashMeta, groupMeta) it is a sale loaded before
// they existed: the scripts keep records for their ARGV's retention and
// leave the keys they create without a ttl.
func loaded(meta fields) fields {
	return meta.with("keep_ms", keepMs, "expire_at_ms", saleEnd, "version", 3)
}

// sale seeds the sale's meta, stock and users (none if users is empty).
func sale(meta fields, stock int, users fields) [][]any {
	cmds := join(meta.hset(act.Meta, saleTTLms), [][]any{{"SET", act.Stock, stock, "PX", saleTTLms}})
	if len(users) > 0 {
		cmds = append(cmds, users.hset(act.Users, saleTTLms)...)
	}
	return cmds
}

// saleState is the state sale seeds.
func saleState(meta fields, stock int, users fields) state {
	s := state{act.Meta: meta.hash(saleTTL), act.Stock: fmt.Sprintf("%d %s", stock, saleTTL)}
	if len(users) > 0 {
		s[act.Users] = users.hash(saleTTL)
	}
	return s
}

// newOrder is the record accept.lua, open_group.lua and join_group.lua
// write: no field that holds its default (fence 0, not persisted, no group,
// amount = price × qty).
func newOrder(user, qty, price int, group string) fields {
	f := fields{
		"user": user, "qty": qty, "price": price, "status": "pending_payment",
		"created_ms": at(0), "pay_by_ms": at(time.Minute), "outbox": "<entry>",
	}
	if group != "" {
		f["group"] = group
	}
	return f
}

type scriptCase struct {
	name   string
	seed   [][]any
	script *redis.Script
	keys   []string
	args   []any
	want   any   // the reply, times and entry ids normalised
	after  state // every key
	// published: the messages published on any channel ("channel message").
	published []string
}

func runScriptCases(t *testing.T, cases []scriptCase) {
	t.Helper()
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	ps := rdb.PSubscribe(ctx, "*")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := ps.Channel()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			base := rdb.Time(ctx).Val().UnixMilli()
			seed(t, rdb, base, tc.seed)
			got, err := tc.script.Run(ctx, rdb, tc.keys, tc.args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := normReply(got, base); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("returned %#v\n          want %#v", got, tc.want)
			}
			if after := snapshot(t, rdb, base); !reflect.DeepEqual(after, tc.after) {
				for _, k := range slices.Sorted(maps.Keys(merge(after, tc.after))) {
					if after[k] != tc.after[k] {
						t.Errorf("%s:\n got %q\nwant %q", k, after[k], tc.after[k])
					}
				}
			}
			// A marker published after the script ends the script's messages.
			if err := rdb.Publish(ctx, "end-of-case", "x").Err(); err != nil {
				t.Fatal(err)
			}
			var pub []string
		read:
			for {
				select {
				case m := <-msgs:
					if m.Channel == "end-of-case" {
						break read
					}
					pub = append(pub, m.Channel+" "+m.Payload)
				case <-time.After(10 * time.Second):
					t.Fatal("the end-of-case marker never arrived")
				}
			}
			if !slices.Equal(pub, tc.published) {
				t.Errorf("published %q, want %q", pub, tc.published)
			}
		})
	}
}

func TestAcceptScript_table(t *testing.T) {
	idem := act.Idempotency(7, "key-1")
	noKey := act.Idempotency(7, "-") // what the store names when the request has no key
	keys := func(idem string) []string {
		return []string{act.Meta, act.Stock, act.Users, act.Order(no1), idem, act.Outbox}
	}
	args := func(qty int, hasKey string) []any { return []any{7, qty, no1, hasKey, idemTTLms, retention} }
	// User 8 holds one unit already.
	meta := flashMeta().with("accepted", 1)
	open := sale(meta, 9, fields{"8": 1})
	untouched := saleState(meta, 9, fields{"8": 1})
	refused := func(code int64, left, held int64) []any {
		return []any{code, "", left, held, int64(0), int64(0), int64(0)}
	}
	accepted := merge(saleState(meta.with("accepted", 2), 7, fields{"7": 2, "8": 1}), state{
		act.Order(no1): newOrder(7, 2, 1999, "").hash(kept),
		act.Outbox:     streamOf(persist, "<entry> o="+no1),
	})

	runScriptCases(t, []scriptCase{
		{
			name: "accepted: units taken, the record written and queued, no key remembered", seed: open,
			script: acceptScript, keys: keys(noKey), args: args(2, "0"),
			want:  []any{int64(0), no1, int64(7), int64(2), "now+0s", "now+60s", int64(1999)},
			after: accepted,
		},
		{
			name: "accepted with an Idempotency-Key remembers it", seed: open,
			script: acceptScript, keys: keys(idem), args: args(2, "1"),
			want:  []any{int64(0), no1, int64(7), int64(2), "now+0s", "now+60s", int64(1999)},
			after: merge(accepted, state{idem: no1 + " ttl~86400s"}),
		},
		{
			name:   "a key that named an order replays it and changes nothing",
			seed:   join(open, [][]any{{"SET", idem, no0, "PX", idemTTLms}}),
			script: acceptScript, keys: keys(idem), args: args(1, "1"),
			want:  []any{int64(7), no0, int64(0), int64(0), int64(0), int64(0), int64(0)},
			after: merge(untouched, state{idem: no0 + " ttl~86400s"}),
		},
		{
			name: "an order number already taken by another user (13): nothing changes, the key is not remembered",
			seed: join(open, orderSeed(placed(1999, "").with("user", 9))), script: acceptScript, keys: keys(idem), args: args(1, "1"),
			want: refused(13, 0, 0), after: merge(untouched, orderState(placed(1999, "").with("user", 9))),
		},
		{
			// go-redis sends a script again after a read timeout although it
			// ran: the second run answers as the first, not with a second order.
			name: "the request's own order, made by a run whose answer was lost: its answer again, nothing changes",
			seed: join(open, orderSeed(placed(1999, ""))), script: acceptScript, keys: keys(noKey), args: args(1, "0"),
			want:  []any{int64(0), no1, int64(9), int64(0), "now-10s", "now+50s", int64(1999)},
			after: merge(untouched, orderState(placed(1999, ""))),
		},
		{
			name: "a loaded sale: the users hash and outbox created here expire at expire_at_ms, the record is kept keep_ms",
			seed: sale(loaded(flashMeta()), 10, nil), script: acceptScript, keys: keys(idem), args: args(2, "1"),
			want: []any{int64(0), no1, int64(8), int64(2), "now+0s", "now+60s", int64(1999)},
			after: merge(saleState(loaded(flashMeta()).with("accepted", 1), 8, nil), state{
				act.Users:      fields{"7": 2}.hash(saleEndTTL),
				act.Order(no1): newOrder(7, 2, 1999, "").hash(keptByMeta),
				act.Outbox:     streamOf(saleEndTTL, "<entry> o="+no1),
				idem:           no1 + " " + idemKept,
			}),
		},
		{
			name:   "a loaded sale: a key with a ttl keeps it (users), one without gets expire_at_ms (outbox)",
			seed:   join(sale(loaded(meta), 9, fields{"8": 1}), [][]any{{"XADD", act.Outbox, "1-1", "o", no0}}),
			script: acceptScript, keys: keys(noKey), args: args(2, "0"),
			want: []any{int64(0), no1, int64(7), int64(2), "now+0s", "now+60s", int64(1999)},
			after: merge(saleState(loaded(meta).with("accepted", 2), 7, fields{"7": 2, "8": 1}), state{
				act.Order(no1): newOrder(7, 2, 1999, "").hash(keptByMeta),
				act.Outbox:     streamOf(saleEndTTL, "1-1 o="+no0, "<entry> o="+no1),
			}),
		},
		{
			name: "a negative quantity (6) takes nothing and gives nothing", seed: open,
			script: acceptScript, keys: keys(idem), args: args(-3, "1"),
			want: refused(6, 9, 0), after: untouched,
		},
		{
			name: "a zero quantity (6)", seed: open,
			script: acceptScript, keys: keys(noKey), args: args(0, "0"),
			want: refused(6, 9, 0), after: untouched,
		},
		{
			name: "over the per-user limit (4)", seed: sale(meta, 8, fields{"7": 1, "8": 1}),
			script: acceptScript, keys: keys(idem), args: args(2, "1"),
			want: refused(4, 8, 1), after: saleState(meta, 8, fields{"7": 1, "8": 1}),
		},
		{
			name: "sold out (5)", seed: sale(meta, 0, fields{"8": 1}),
			script: acceptScript, keys: keys(noKey), args: args(1, "0"),
			want: refused(5, 0, 0), after: saleState(meta, 0, fields{"8": 1}),
		},
		{
			name: "more asked than left (5) takes nothing", seed: sale(meta, 1, fields{"8": 1}),
			script: acceptScript, keys: keys(idem), args: args(2, "1"),
			want: refused(5, 1, 0), after: saleState(meta, 1, fields{"8": 1}),
		},
		{
			name: "not started (2)", seed: sale(meta.with("starts_ms", at(time.Hour), "ends_ms", at(2*time.Hour)), 9, fields{"8": 1}),
			script: acceptScript, keys: keys(noKey), args: args(1, "0"),
			want: refused(2, 9, 0), after: saleState(meta.with("starts_ms", at(time.Hour), "ends_ms", at(2*time.Hour)), 9, fields{"8": 1}),
		},
		{
			name: "ended (3)", seed: sale(meta.with("starts_ms", at(-2*time.Hour), "ends_ms", at(-time.Second)), 9, fields{"8": 1}),
			script: acceptScript, keys: keys(noKey), args: args(1, "0"),
			want: refused(3, 9, 0), after: saleState(meta.with("starts_ms", at(-2*time.Hour), "ends_ms", at(-time.Second)), 9, fields{"8": 1}),
		},
		{
			name: "closed (3) inside its window", seed: sale(meta.with("status", "closed"), 9, fields{"8": 1}),
			script: acceptScript, keys: keys(noKey), args: args(1, "0"),
			want: refused(3, 9, 0), after: saleState(meta.with("status", "closed"), 9, fields{"8": 1}),
		},
		{
			name: "draft (1)", seed: sale(meta.with("status", "draft"), 9, fields{"8": 1}),
			script: acceptScript, keys: keys(noKey), args: args(1, "0"),
			want: refused(1, 9, 0), after: saleState(meta.with("status", "draft"), 9, fields{"8": 1}),
		},
		{
			name: "unknown activity (1) creates no key at all, not even the Idempotency-Key", seed: nil,
			script: acceptScript, keys: keys(idem), args: args(1, "1"),
			want: refused(1, 0, 0), after: state{},
		},
		{
			name: "a group buy's orders are not accepted here (8)", seed: sale(groupMeta(), 10, nil),
			script: acceptScript, keys: keys(idem), args: args(1, "1"),
			want: refused(8, 10, 0), after: saleState(groupMeta(), 10, nil),
		},
	})
}
