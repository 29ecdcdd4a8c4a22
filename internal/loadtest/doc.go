// Package loadtest is the load-test kit behind `make loadtest`: it starts a
// stack of real processes (or uses a URL given), creates a sale, mints
// tokens, drives wrk and ab, waits for persistence, checks the invariants
// (internal/invariants) and reports. The fault soak (internal/soak) runs on
// the same stack and breaks it with the kit's faults: Proc.Kill and
// Restart, Stack.PauseRedis, StopMySQL and their undoing (faults.go).
package loadtest
