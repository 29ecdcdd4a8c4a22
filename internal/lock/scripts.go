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

// noGuard lets every obtain go on; noFinish does nothing before a release.
const (
	noGuard  = "local function guard() return {} end\n"
	noFinish = "local function finish() return {} end\n"
)

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
	tableObtainMerged  = luascript.NewMerged(noGuard + mustSource("table_obtain"))
	tableReleaseMerged = luascript.NewMerged(noFinish + mustSource("table_release_with"))
	tableRefreshScript = lua.Script("table_refresh")
)
