package redisstore

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/luascript"
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

// norm turns a ms timestamp near base into "now±Ns".
func norm(s string, base int64) string {
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
		if strings.Contains(v, "|") {
			return recordShown(v, base) // an order record (lib_record's fields, joined by '|')
		}
		return norm(v, base)
	case error:
		code, _, _ := strings.Cut(v.Error(), " ") // the error's code: the rest names script lines
		return "error: " + code
	}
	return v
}

// recordAfter in a case's want stands for order no1's record as the
// script left it in Redis (transition.lua returns the record it wrote):
// the reply must hold that very record, shown as snapshot shows it.
const recordAfter = "<no1's record after>"

// withRecordAfter is want with recordAfter replaced by no1's record as
// Redis holds it now (want as it is when it names none).
func withRecordAfter(t *testing.T, rdb *redis.Client, base int64, want any) any {
	t.Helper()
	w, ok := want.([]any)
	if !ok || !slices.Contains(w, any(recordAfter)) {
		return want
	}
	v, err := rdb.HGet(context.Background(), act.Orders, no1).Result()
	if err != nil {
		t.Fatalf("no1's record: %v", err)
	}
	out := slices.Clone(w)
	for i := range out {
		if out[i] == any(recordAfter) {
			out[i] = recordShown(v, base)
		}
	}
	return out
}

// rec is an order record (lib_record.lua's form): seeded as such (its at
// values written as unix ms), and shown by snapshot as rec{name=value …},
// fields holding their default (”) left out.
type rec fields

func (r rec) with(kv ...any) rec { return rec(fields(r).with(kv...)) }

// encode is r as lib_record writes it, its at values base+offset ms.
func (r rec) encode(base int64) string {
	m := map[string]string{}
	for name, v := range r {
		if d, ok := v.(at); ok {
			m[name] = strconv.FormatInt(base+time.Duration(d).Milliseconds(), 10)
			continue
		}
		m[name] = fmt.Sprint(v)
	}
	return formatRecord(m)
}

func (r rec) String() string {
	return "rec" + strings.TrimPrefix(fields(r).render(), "hash")
}

// recordShown is how snapshot shows a record read from Redis.
func recordShown(s string, base int64) string {
	r := rec{}
	for name, v := range recordValues(s) {
		if v != "" {
			r[name] = norm(v, base)
		}
	}
	return r.String()
}

func snapshot(t *testing.T, rdb *redis.Client, base int64) state {
	t.Helper()
	ctx := context.Background()
	out := state{}
	for _, k := range rdb.Keys(ctx, "*").Val() {
		var v string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			v = norm(rdb.Get(ctx, k).Val(), base)
		case "hash":
			f := fields{}
			for name, val := range rdb.HGetAll(ctx, k).Val() {
				if strings.HasSuffix(k, ":orders") {
					f[name] = recordShown(val, base)
				} else {
					f[name] = norm(val, base)
				}
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
		case "stream": // an outbox in the form before 2026-11-24
			v = fmt.Sprintf("stream[%d]", rdb.XLen(ctx, k).Val())
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
func seed(t testing.TB, rdb *redis.Client, base int64, cmds [][]any) {
	t.Helper()
	for _, c := range cmds {
		args := slices.Clone(c)
		for i, a := range args {
			switch a := a.(type) {
			case at:
				args[i] = strconv.FormatInt(base+time.Duration(a).Milliseconds(), 10)
			case rec:
				args[i] = a.encode(base)
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
	no3       = "1-DDDDDDDDDDDDDDDD"
	gid       = "1-GGGGGGGGGGGGGGGG"
	gid2      = "1-HHHHHHHHHHHHHHHH"
	saleTTLms = int64(2 * time.Hour / time.Millisecond)
	saleTTL   = "ttl~7200s" // the sale's keys, as seeded
	// A sale loaded with expire_at_ms (loaded): a key a script creates
	// expires at expire_at_ms, saleEnd from now — not the seeded keys' ttl
	// (load.lua makes them one), so a key given the meta's own ttl shows.
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

// loaded is meta as load.lua writes it: with expire_at_ms and version.
// Without them (flashMeta, groupMeta) it is a sale loaded before they
// existed: the scripts leave the keys they create without a ttl (Upgrade
// gives such a sale its expiry).
func loaded(meta fields) fields {
	return meta.with("keep_ms", int64(3*24*time.Hour/time.Millisecond), "expire_at_ms", saleEnd, "version", 3)
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

// newOrder is the record lib_accept.lua, open_group.lua and join_group.lua
// write now: pending payment, due in a minute.
func newOrder(user, qty, price int, group string) rec {
	r := rec{"user": user, "qty": qty, "price": price, "status": "pending_payment", "created_ms": at(0), "pay_by_ms": at(time.Minute)}
	if group != "" {
		r["group"] = group
	}
	return r
}

// placed is order no1 of user 7, one unit, accepted ten seconds ago and on
// the outbox since.
func placed(price int, group string) rec {
	return newOrder(7, 1, price, group).with("created_ms", at(-10*time.Second), "pay_by_ms", at(50*time.Second))
}

// orders seeds the orders hash with records (no, rec, no, rec, …), kept as
// long as the sale's keys.
func orders(noRec ...any) [][]any {
	return [][]any{append([]any{"HSET", act.Orders}, noRec...), {"PEXPIRE", act.Orders, saleTTLms}}
}

// ordersOf is the state of the orders hash holding records (no, rec, …).
func ordersOf(ttl string, noRec ...any) string {
	f := fields{}
	for i := 0; i < len(noRec); i += 2 {
		f[noRec[i].(string)] = noRec[i+1]
	}
	return f.hash(ttl)
}

// outboxed seeds the outbox with members (no, at, no, at, …).
func outboxed(memberAt ...any) [][]any {
	cmd := []any{"ZADD", act.Outbox}
	for i := 0; i < len(memberAt); i += 2 {
		cmd = append(cmd, memberAt[i+1], memberAt[i])
	}
	return [][]any{cmd}
}

// orderSeed writes no1's record o, on the outbox since its creation.
func orderSeed(o rec) [][]any { return join(orders(no1, o), outboxed(no1, o["created_ms"])) }

// orderState is the state orderSeed writes.
func orderState(o rec) state {
	return state{act.Orders: ordersOf(saleTTL, no1, o), act.Outbox: zsetOf(persist, no1, o["created_ms"])}
}

type scriptCase struct {
	name   string
	seed   [][]any
	script *redis.Script
	keys   []string
	args   []any
	// merged and calls, instead of script, keys and args: one run of a
	// merged script for calls; want is then the list of their replies.
	merged *luascript.Merged
	calls  []luascript.Call
	want   any   // the reply, times normalised
	after  state // every key
	// published: the messages published on any channel ("channel message").
	published []string
}

// run runs the case's script once.
func (tc scriptCase) run(ctx context.Context, rdb *redis.Client) (any, error) {
	if tc.merged == nil {
		return tc.script.Run(ctx, rdb, tc.keys, tc.args...).Result()
	}
	var out []any
	for _, cmd := range tc.merged.RunAll(ctx, rdb, tc.calls) {
		v, err := cmd.Result()
		if err != nil {
			v = err
		}
		out = append(out, v)
	}
	return out, nil
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
			got, err := tc.run(ctx, rdb)
			if err != nil {
				t.Fatal(err)
			}
			if got := normReply(got, base); !reflect.DeepEqual(got, withRecordAfter(t, rdb, base, tc.want)) {
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
