package lock

import (
	"embed"

	"github.com/flashsale/flashsale/internal/luascript"
)

// The Lua scripts, one per file in scripts/, each headed by its KEYS, ARGV
// and returns, and by the libraries (lib_*.lua) it uses, which the loader
// prepends.

//go:embed scripts/*.lua
var scriptFiles embed.FS

var lua = luascript.New(scriptFiles, "scripts")

// Lua is the lock library's Lua for callers' scripts that run a step under
// a mutex (Client.Elide, Lock.ReleaseIn): link it (luascript.New(files,
// "scripts", lock.Lua)) and name lib_lock on a script's "uses:" line;
// scripts/lib_lock.lua says what it offers.
var Lua = lua

var (
	obtainScript  = lua.Script("obtain")
	releaseScript = lua.Script("release")
	refreshScript = lua.Script("refresh")

	reentrantObtainScript  = lua.Script("reentrant_obtain")
	reentrantReleaseScript = lua.Script("reentrant_release")
	reentrantRefreshScript = lua.Script("reentrant_refresh")

	raiseFenceScript = lua.Script("raise_fence")

	fairObtainScript  = lua.Script("fair_obtain")
	fairReleaseScript = lua.Script("fair_release")
	fairLeaveScript   = lua.Script("fair_leave")
	fairRefreshScript = lua.Script("fair_refresh")

	// A mutex kept in a table (InTable): its obtains and releases as
	// merged scripts, the calls of one pipeline run as one script
	// (luascript.Merged) with one HMGET and HSET or HDEL per table. A
	// mutex with keys of its own runs obtain.lua and release.lua, one
	// EVALSHA each in the shared pipeline: merged, they cost Redis no less
	// (`make bench-lock`, uncontended, one machine: 41.6–43.4k obtain+release
	// a second at 11.8–12.9 µs of Redis CPU merged, 43.8–44.7k at 11.8–12.0
	// apart; docs/benchmarks.md) — merging pays where a script does
	// something for the whole batch at once.
	tableObtainMerged  = luascript.NewMerged(mustSource("table_obtain"))
	tableReleaseMerged = luascript.NewMerged(mustSource("table_release"))
	tableRefreshScript = lua.Script("table_refresh")
)

// mustSource is a script's text with its libraries; a missing one is a
// build mistake, caught by every test.
func mustSource(name string) string {
	src, err := lua.Source(name)
	if err != nil {
		panic(err)
	}
	return src
}

// Scripts are the scripts the library loads, by name, as Redis runs them:
// libraries included, a merged script in its frame (cmd/api scripts
// prints them; docs/scripts holds them).
func Scripts() map[string]string {
	out := map[string]string{
		"table_obtain":  tableObtainMerged.Source(),
		"table_release": tableReleaseMerged.Source(),
	}
	for _, name := range []string{"obtain", "release", "refresh", "reentrant_obtain", "reentrant_release",
		"reentrant_refresh", "raise_fence", "fair_obtain", "fair_release", "fair_leave", "fair_refresh", "table_refresh"} {
		out[name] = mustSource(name)
	}
	return out
}
