package lock

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one per file in scripts/, each headed by its KEYS, ARGV
// and returns. Files named lib_*.lua hold shared functions; a script that
// uses them gets them prepended here, since EVAL has no imports.

//go:embed scripts/*.lua
var scriptFiles embed.FS

func script(name string, libs ...string) *redis.Script {
	var src []byte
	for _, f := range append(libs, name) {
		b, err := scriptFiles.ReadFile("scripts/" + f + ".lua")
		if err != nil {
			panic("lock: missing embedded script " + f) // a build mistake, caught by every test
		}
		src = append(src, b...)
	}
	return redis.NewScript(string(src))
}

var (
	obtainScript  = script("obtain", "lib_fence")
	releaseScript = script("release")
	refreshScript = script("refresh")

	reentrantObtainScript  = script("reentrant_obtain", "lib_fence")
	reentrantReleaseScript = script("reentrant_release")
	reentrantRefreshScript = script("reentrant_refresh")

	raiseFenceScript = script("raise_fence")

	fairObtainScript  = script("fair_obtain", "lib_fence", "lib_fair")
	fairReleaseScript = script("fair_release", "lib_fence", "lib_fair")
	fairLeaveScript   = script("fair_leave", "lib_fence", "lib_fair")
	fairRefreshScript = script("fair_refresh")
)
