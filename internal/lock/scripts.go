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
)
