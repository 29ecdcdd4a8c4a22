package redisstore

import "github.com/flashsale/flashsale/internal/rediskeys"

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
