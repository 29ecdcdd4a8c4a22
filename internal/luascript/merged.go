package luascript

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Merged is a script whose concurrent calls run as one: the calls of one
// pipeline with the same script and group run as a single EVALSHA, which
// is handed every call's keys and arguments and answers each call
// (internal/redispipe sends them so). Redis then parses, looks up and
// starts one script where it would have run one per call, and a script
// written for a batch (NewMerged) can also read what its calls share once
// and write it once: one HSET of many fields instead of an HSET per call.
// The calls of a group run atomically together, in the order they were
// made.
//
// Measured (`make bench-rediscost`, docs/benchmarks.md): the order path's
// scripts merged cost Redis a fraction of their CPU run one by one.
type Merged struct {
	script *redis.Script
	src    string
}

//go:embed scripts/merged.lua
var mergedFrame string

//go:embed scripts/each.lua
var eachBody string

// NewMerged returns the merged script whose body is Lua run as a function
// of calls — a list of {keys = {…}, args = {…}}, one per call, in the order
// they were made — returning a list of one reply per call. The frame
// around it is scripts/merged.lua.
func NewMerged(body string) *Merged {
	src := MergedSource(body)
	return &Merged{script: redis.NewScript(src), src: src}
}

// MergedSource is the text NewMerged(body) runs: body made a function of
// calls, then the frame.
func MergedSource(body string) string {
	return "local function batch(calls)\n" + strings.TrimRight(body, "\n") + "\nend\n" + mergedFrame
}

// Each is the body of a merged script that runs one, a whole script
// written for a single call (it reads KEYS and ARGV; libraries included),
// for each call in turn (scripts/each.lua). A call whose script raises an
// error gets that error as its reply; the others go on.
func Each(one string) string {
	return "local function one(KEYS, ARGV)\n" + strings.TrimRight(one, "\n") + "\nend\n" + eachBody
}

// Script is the whole merged script (frame and body): what a pipeline
// sends and loads.
func (m *Merged) Script() *redis.Script { return m.script }

// Source is the whole merged script's text (frame and body).
func (m *Merged) Source() string { return m.src }

// Hash is the SHA1 Redis knows the merged script by.
func (m *Merged) Hash() string { return m.script.Hash() }

// Load loads the merged script into Redis.
func (m *Merged) Load(ctx context.Context, rdb redis.Scripter) error {
	return m.script.Load(ctx, rdb).Err()
}

// Run runs one call of m on rdb by itself (not batched): keys and args are
// the call's own, and so is the answer.
func (m *Merged) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	k, a := PackOne(keys, args)
	return AnswerOne(m.script.Run(ctx, rdb, k, a...))
}

// Call is one call of a merged script: its own keys and arguments.
type Call struct {
	Keys []string
	Args []any
}

// RunAll runs calls, a batch the caller already holds, as one run of m on
// rdb (not through a pipeline): one answer per call, in order. With no
// calls it sends nothing. On Redis Cluster every call's keys must be of one
// slot.
func (m *Merged) RunAll(ctx context.Context, rdb redis.Scripter, calls []Call) []*redis.Cmd {
	if len(calls) == 0 {
		return nil
	}
	keys, args := Pack(calls)
	return Answers(m.script.Run(ctx, rdb, keys, args...), len(calls))
}

// PackOne packs a single call as merged.lua reads calls.
func PackOne(keys []string, args []any) ([]string, []any) {
	a := make([]any, 0, 3+len(args))
	a = append(a, 1, len(keys), len(args))
	return keys, append(a, args...)
}

// Pack packs calls as merged.lua reads them: every call's keys, one after
// the other; then their count, each call's number of keys and arguments,
// and every call's arguments. A call whose keys are those of an earlier
// call of the batch (the calls of one sale name the same keys: an order's
// nine) does not send them again: its number of keys is -j, "call j's
// keys". Each key sent costs Redis its parsing and a Lua string; shared,
// they cost an order nothing (docs/benchmarks.md, "Keys sent once per
// batch").
func Pack(calls []Call) ([]string, []any) {
	nk, na := 0, 0
	for _, c := range calls {
		nk += len(c.Keys)
		na += len(c.Args)
	}
	keys := make([]string, 0, nk)
	args := make([]any, 0, 1+2*len(calls)+na)
	args = append(args, len(calls))
	var sent [maxKeyOwners]int // calls (0-based) whose keys went out, most recent last
	owners := 0
	for i, c := range calls {
		if j := sameKeys(calls, sent[:owners], c.Keys); j >= 0 && shareKeys {
			args = append(args, -(j + 1), len(c.Args))
			continue
		}
		if len(c.Keys) > 0 {
			if owners == maxKeyOwners {
				copy(sent[:], sent[1:])
				owners--
			}
			sent[owners] = i
			owners++
		}
		keys = append(keys, c.Keys...)
		args = append(args, len(c.Keys), len(c.Args))
	}
	for _, c := range calls {
		args = append(args, c.Args...)
	}
	return keys, args
}

// shareKeys is false only in BenchmarkMerged_sharedKeys_redisCPU's
// "each" runs: every call sending its keys, as before they were shared.
var shareKeys = true

// maxKeyOwners bounds the earlier calls Pack compares a call's keys with:
// a batch's calls are mostly of one sale, and comparing with every earlier
// call would cost a batch of calls of all different keys n² compares.
const maxKeyOwners = 4

// sameKeys is the call among owners (indexes into calls) whose keys are
// keys, or -1.
func sameKeys(calls []Call, owners []int, keys []string) int {
	if len(keys) == 0 {
		return -1
	}
	for x := len(owners) - 1; x >= 0; x-- {
		if slices.Equal(calls[owners[x]].Keys, keys) {
			return owners[x]
		}
	}
	return -1
}

// AnswerOne is the one call's answer out of a merged run of one call.
func AnswerOne(cmd *redis.Cmd) *redis.Cmd {
	res, err := cmd.Slice()
	if err != nil {
		return cmd // the run failed: that is the call's answer
	}
	if len(res) != 1 {
		return Failed(fmt.Errorf("luascript: a merged script answered %d replies for 1 call", len(res)))
	}
	return replyCmd(res[0])
}

// Answers are each of n calls' answers out of their merged run's cmd: a
// run that failed is every call's failure.
func Answers(cmd *redis.Cmd, n int) []*redis.Cmd {
	out := make([]*redis.Cmd, n)
	res, err := cmd.Slice()
	if err == nil && len(res) != n {
		err = fmt.Errorf("luascript: a merged script answered %d replies for %d calls", len(res), n)
	}
	for i := range out {
		if err != nil {
			out[i] = Failed(err)
			continue
		}
		out[i] = replyCmd(res[i])
	}
	return out
}

// replyCmd is a Cmd holding one call's reply out of a merged answer: its
// value, its error (a Lua error reply), or redis.Nil.
func replyCmd(v any) *redis.Cmd {
	cmd := redis.NewCmd(context.Background())
	switch r := v.(type) {
	case nil:
		cmd.SetErr(redis.Nil)
	case error:
		cmd.SetErr(r)
	default:
		cmd.SetVal(r)
	}
	return cmd
}

// Failed is a Cmd that carries err.
func Failed(err error) *redis.Cmd {
	cmd := redis.NewCmd(context.Background())
	cmd.SetErr(err)
	return cmd
}
