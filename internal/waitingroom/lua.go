package waitingroom

import (
	"embed"

	"github.com/flashsale/flashsale/internal/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// Lua is the waiting room's scripts' directory; stock's load.lua links it
// for lib_queue (the serving counter advanced at the old rate before a new
// one).
var Lua = luascript.New(scriptFiles, "scripts")

var (
	queueScript    = Lua.Script("queue")
	countersScript = Lua.Script("counters")
)

// Scripts are the scripts the waiting room loads, by name, as Redis runs
// them (cmd/api scripts prints them).
func Scripts() map[string]string {
	out := map[string]string{}
	for _, name := range []string{"queue", "counters"} {
		src, err := Lua.Source(name)
		if err != nil {
			panic(err) // a build mistake, caught by every test
		}
		out[name] = src
	}
	return out
}
