package stock

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Seed keys → run load.lua → compare its reply and every key in Redis
// afterwards, as internal/redisstore's script tables do. A time is an
// offset from the case's start (Redis TIME): seeded and passed as unix ms,
// shown as "now±Ns" in a key.

// offset is a time relative to the case's start.
type offset time.Duration

func (o offset) String() string { return relMs(time.Duration(o).Milliseconds()) }

func relMs(ms int64) string {
	s := int64(math.Round(float64(ms) / 1000))
	if s < 0 {
		return fmt.Sprintf("now%ds", s)
	}
	return fmt.Sprintf("now+%ds", s)
}

var sale1 = rediskeys.For(1)

// saleKeys are load.lua's KEYS: every key of a sale that has an expiry.
var saleKeys = []string{sale1.Meta, sale1.Stock, sale1.Users, sale1.Outbox, sale1.Forming(), sale1.Unsettled(),
	sale1.Orders, sale1.Idem}

// rules are load.lua's ARGV.
type rules struct {
	status                 string
	starts, ends, expireAt offset
	limit, total, price    int
	payTTL                 int64
	typ                    string
	size                   int
	groupTTL, keep         int64
	version                int64
	// more is ARGV[14] on: shards, share, shard, paused, items (load.lua).
	more []any
}

// flash is a flash sale of 10 units, open an hour either side of now, its
// keys expiring in two hours (load.lua's ARGV[6]).
func flash(version int64) rules {
	return rules{status: "published", starts: offset(-time.Hour), ends: offset(time.Hour), expireAt: offset(2 * time.Hour),
		limit: 2, total: 10, price: 1999, payTTL: 60_000, typ: "seckill", keep: 259_200_000, version: version}
}

func (r rules) argv() []any {
	return append([]any{r.status, r.starts, r.ends, r.limit, r.total, r.expireAt, r.price, r.payTTL, r.typ, r.size, r.groupTTL,
		r.keep, r.version}, r.more...)
}

// meta is the meta hash holding r, with counters (name, value, ...).
func (r rules) meta(counters ...any) map[string]any {
	m := map[string]any{
		"status": r.status, "starts_ms": r.starts, "ends_ms": r.ends, "limit": r.limit, "total": r.total,
		"price": r.price, "pay_ttl_ms": r.payTTL, "type": r.typ, "group_size": r.size, "group_ttl_ms": r.groupTTL,
		"keep_ms": r.keep, "expire_at_ms": r.expireAt, "version": r.version, "shards": 1, "sale_total": r.total,
		"paused": 0, "items": 1,
	}
	for i := 0; i < len(counters); i += 2 {
		m[counters[i].(string)] = counters[i+1]
	}
	return m
}

// hsetCmd seeds key with the hash m.
func hsetCmd(key string, m map[string]any) []any {
	cmd := []any{"HSET", key}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		cmd = append(cmd, name, m[name])
	}
	return cmd
}

// hashState is the state of the hash m with ttl ("ttl~Ns" or "persist").
func hashState(m map[string]any, ttl string) string {
	var b []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		b = append(b, name+"="+fmt.Sprint(m[name]))
	}
	return "hash{" + strings.Join(b, " ") + "} " + ttl
}

// Keys a sale has besides meta and stock, once orders came in.
var (
	usersSeed = [][]any{{"HSET", sale1.Users, 7, 2}}
	groupSeed = [][]any{
		{"ZADD", sale1.Outbox, 1, "1-AAAA"},
		{"ZADD", sale1.Forming(), 5, "1-GGGG"},
		{"ZADD", sale1.Unsettled(), 5, "1-GGGG"}, {"PEXPIRE", sale1.Unsettled(), 86_400_000},
		{"HSET", sale1.Orders, "1-AAAA", "7|1"},
		{"HSET", sale1.Idem, "7:k", "1-AAAA"},
	}
)

// others is the state usersSeed and groupSeed write, each key with ttl.
func others(ttl string) map[string]string {
	return map[string]string{
		sale1.Users:       "hash{7=2} " + ttl,
		sale1.Outbox:      "zset[1-AAAA@1] " + ttl,
		sale1.Forming():   "zset[1-GGGG@5] " + ttl,
		sale1.Unsettled(): "zset[1-GGGG@5] " + ttl,
		sale1.Orders:      "hash{1-AAAA=7|1} " + ttl,
		sale1.Idem:        "hash{7:k=1-AAAA} " + ttl,
	}
}

func withState(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

func TestLoadScript_table(t *testing.T) {
	v1 := flash(1)
	// v2: the admin moved the end an hour on and changed the price and limit.
	v2 := v1
	v2.ends, v2.expireAt, v2.price, v2.limit, v2.keep, v2.version = offset(2*time.Hour), offset(3*time.Hour), 1499, 3, 262_800_000, 2
	// A live sale as v1 loaded it: 3 orders accepted, 1 returned, 8 units left.
	live := func(meta map[string]any) [][]any {
		return slices.Concat([][]any{hsetCmd(sale1.Meta, meta), {"SET", sale1.Stock, 8}},
			usersSeed, groupSeed, [][]any{
				{"PEXPIREAT", sale1.Meta, v1.expireAt}, {"PEXPIREAT", sale1.Stock, v1.expireAt}, {"PEXPIREAT", sale1.Users, v1.expireAt}})
	}
	liveState := func(meta map[string]any, ttl string) map[string]string {
		return withState(others(ttl), map[string]string{sale1.Meta: hashState(meta, ttl), sale1.Stock: "8 " + ttl})
	}
	// liveV1 is live's state: the unsettled zset keeps its own ttl.
	liveV1 := func(meta map[string]any) map[string]string {
		return withState(liveState(meta, "ttl~7200s"), map[string]string{
			sale1.Outbox: "zset[1-AAAA@1] persist", sale1.Forming(): "zset[1-GGGG@5] persist",
			sale1.Unsettled(): "zset[1-GGGG@5] ttl~86400s",
			sale1.Orders:      "hash{1-AAAA=7|1} persist", sale1.Idem: "hash{7:k=1-AAAA} persist",
		})
	}
	counters := []any{"accepted", 3, "returned", 1}
	closedV2 := v2
	closedV2.status = "closed"
	publishedV3 := v2
	publishedV3.ends, publishedV3.version = offset(90*time.Minute), 3
	v10, v9 := v2, v1
	v10.version, v9.version = 10, 9
	legacy := v1.meta(counters...) // loaded before keep_ms, expire_at_ms and version
	delete(legacy, "keep_ms")
	delete(legacy, "expire_at_ms")
	delete(legacy, "version")
	past := v1
	past.expireAt = offset(-time.Second)
	pastV2 := v2
	pastV2.expireAt = offset(-time.Second)

	runLoadCases(t, []loadCase{
		{
			name: "first load: every rule, keep_ms, expire_at_ms and version; the counters at 0, the stock at total; absent keys not created",
			load: v1, want: []any{int64(10), int64(1)},
			after: map[string]string{sale1.Meta: hashState(v1.meta("accepted", 0, "returned", 0), "ttl~7200s"), sale1.Stock: "10 ttl~7200s"},
		},
		{
			name: "first load of version 0 (a row never updated since versions came in) loads",
			load: flash(0), want: []any{int64(10), int64(1)},
			after: map[string]string{sale1.Meta: hashState(flash(0).meta("accepted", 0, "returned", 0), "ttl~7200s"), sale1.Stock: "10 ttl~7200s"},
		},
		{
			name: "first load: the keys of the sale already there (users without a ttl, outbox) get the expiry too",
			seed: slices.Concat(usersSeed, groupSeed[:1]), load: v1, want: []any{int64(10), int64(1)},
			after: map[string]string{
				sale1.Meta: hashState(v1.meta("accepted", 0, "returned", 0), "ttl~7200s"), sale1.Stock: "10 ttl~7200s",
				sale1.Users: "hash{7=2} ttl~7200s", sale1.Outbox: "zset[1-AAAA@1] ttl~7200s",
			},
		},
		{
			name: "a newer version refreshes the rules and every key's expiry, keeps the stock and the counters",
			seed: live(v1.meta(counters...)), load: v2, want: []any{int64(8), int64(1)},
			after: liveState(v2.meta(counters...), "ttl~10800s"),
		},
		{
			name: "versions compare as numbers: 10 is newer than 9",
			seed: live(v9.meta(counters...)), load: v10, want: []any{int64(8), int64(1)},
			after: liveState(v10.meta(counters...), "ttl~10800s"),
		},
		{
			name: "the same version changes nothing (0)",
			seed: live(v1.meta(counters...)), load: func() rules { r := v2; r.version = 1; return r }(), want: []any{int64(8), int64(0)},
			after: liveV1(v1.meta(counters...)),
		},
		{
			name: "an older version changes nothing (0), a close included",
			seed: live(v2.meta(counters...)), load: func() rules { r := v1; r.status = "closed"; return r }(), want: []any{int64(8), int64(0)},
			after: liveV1(v2.meta(counters...)),
		},
		{
			name: "a newer version closes a published sale",
			seed: live(v1.meta(counters...)), load: closedV2, want: []any{int64(8), int64(1)},
			after: liveState(closedV2.meta(counters...), "ttl~10800s"),
		},
		{
			name: "a newer version that says published keeps a closed sale closed, and refreshes the rest",
			seed: live(closedV2.meta(counters...)), load: publishedV3, want: []any{int64(8), int64(1)},
			after: liveState(func() map[string]any { m := publishedV3.meta(counters...); m["status"] = "closed"; return m }(), "ttl~10800s"),
		},
		{
			name: "a sale loaded before versions (none stored) takes version 1, its counters and stock kept",
			seed: live(legacy), load: v1, want: []any{int64(8), int64(1)},
			after: liveState(v1.meta(counters...), "ttl~7200s"),
		},
		{
			// PEXPIREAT in the past deletes every key at once; GET stock is
			// then nil, which ends the Lua table: the reply is empty, and
			// Store.Load reports "load.lua returned []".
			name: "first load with an expiry already past: no key stays, the units it set are reported",
			load: past, want: []any{int64(10), int64(1)}, after: map[string]string{},
		},
		{
			name: "a newer version with an expiry already past deletes all six keys of a live sale, the units left are reported",
			seed: live(v1.meta(counters...)), load: pastV2, want: []any{int64(8), int64(1)}, after: map[string]string{},
		},
	})
}

type loadCase struct {
	name  string
	seed  [][]any
	load  rules
	keys  []string // load.lua's KEYS; nil: saleKeys
	want  []any
	after map[string]string // every key
	// published: the messages published on any channel ("channel message").
	published []string
}

func runLoadCases(t *testing.T, cases []loadCase) {
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
			abs := func(args []any) []any {
				out := slices.Clone(args)
				for i, a := range out {
					if o, ok := a.(offset); ok {
						out[i] = strconv.FormatInt(base+time.Duration(o).Milliseconds(), 10)
					}
				}
				return out
			}
			for _, c := range tc.seed {
				if err := rdb.Do(ctx, abs(c)...).Err(); err != nil {
					t.Fatalf("seed %v: %v", c, err)
				}
			}
			keys := tc.keys
			if keys == nil {
				keys = saleKeys
			}
			got, err := loadScript.Run(ctx, rdb, keys, abs(tc.load.argv())...).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("returned %#v, want %#v", got, tc.want)
			}
			after := keysState(t, rdb, base)
			for _, k := range slices.Sorted(maps.Keys(withState(after, tc.after))) {
				if after[k] != tc.after[k] {
					t.Errorf("%s:\n got %q\nwant %q", k, after[k], tc.after[k])
				}
			}
			// A marker published after the script ends the script's messages.
			if err := rdb.Publish(ctx, "end-of-case", "x").Err(); err != nil {
				t.Fatal(err)
			}
			var pub []string
			for m := range msgs {
				if m.Channel == "end-of-case" {
					break
				}
				pub = append(pub, m.Channel+" "+m.Payload)
			}
			if !slices.Equal(pub, tc.published) {
				t.Errorf("published %q, want %q", pub, tc.published)
			}
		})
	}
}

// keysState renders every key in Redis with its ttl rounded to seconds; a
// ms timestamp within a day of base shows as "now±Ns".
func keysState(t *testing.T, rdb *redis.Client, base int64) map[string]string {
	t.Helper()
	ctx := context.Background()
	norm := func(s string) string {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > base-86_400_000 && n < base+86_400_000 {
			return relMs(n - base)
		}
		return s
	}
	out := map[string]string{}
	for _, k := range rdb.Keys(ctx, "*").Val() {
		var v string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			v = norm(rdb.Get(ctx, k).Val())
		case "hash":
			m := map[string]any{}
			for name, val := range rdb.HGetAll(ctx, k).Val() {
				m[name] = norm(val)
			}
			v = strings.TrimSuffix(hashState(m, ""), " ")
		case "zset":
			var ms []string
			for _, z := range rdb.ZRangeWithScores(ctx, k, 0, -1).Val() {
				ms = append(ms, fmt.Sprint(z.Member)+"@"+strconv.FormatFloat(z.Score, 'f', -1, 64))
			}
			v = "zset[" + strings.Join(ms, " ") + "]"
		case "stream":
			var es []string
			for _, e := range rdb.XRange(ctx, k, "-", "+").Val() {
				var fs []string
				for _, name := range slices.Sorted(maps.Keys(e.Values)) {
					fs = append(fs, name+"="+fmt.Sprint(e.Values[name]))
				}
				es = append(es, e.ID+" "+strings.Join(fs, " "))
			}
			v = "stream[" + strings.Join(es, "; ") + "]"
		default:
			t.Fatalf("key %s has type %s", k, typ)
		}
		ttl := "persist"
		if d := rdb.PTTL(ctx, k).Val(); d >= 0 {
			ttl = fmt.Sprintf("ttl~%ds", (d.Milliseconds()+500)/1000)
		}
		out[k] = v + " " + ttl
	}
	return out
}
