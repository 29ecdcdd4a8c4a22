package redisstore

import (
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// acceptMerged is lib_accept.lua's accept alone, as a merged script: the
// accept's table tests run it without place.lua's lock and rate limit.
var acceptMerged = luascript.NewMerged(mustSource("lib_accept") + "\nreturn accept(calls)\n")

// The scripts, for FuzzScripts (package redisstore_test: it checks with
// internal/invariants, which imports this package).
var (
	AcceptMerged     = acceptMerged
	OpenGroupScript  = openGroupScript
	JoinGroupScript  = joinGroupScript
	TransitionScript = transitionScript
	PersistedScript  = persistedScript
	SettleScript     = settleScript
)

// GroupKeys are open_group.lua's and join_group.lua's keys.
func GroupKeys(k rediskeys.Activity, gid string) []string { return groupKeys(k, gid) }
