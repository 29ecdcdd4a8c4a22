// Package lock provides the Redis locks flashsale stands on.
//
// The mutex (Client.TryObtain, Client.Obtain) has owner tokens of 128 random
// bits with holder metadata, owner-checked release and renewal in Lua, a
// watchdog that renews every ttl/3 and closes Lost when the lock is gone or
// its validity runs out unrenewed, waiting without polling (a local queue per
// key plus a pub/sub release notice, every wait bounded), and a fencing token
// per hold that a resource uses to refuse a stale holder. A step a caller
// runs inside Redis under a mutex can share the lock's script: checked free
// and run in one script without taking the lock (Client.Elide, lock
// elision), or run and released in one (Lock.ReleaseIn), with the Lua of
// lib_lock.lua (compose.go).
//
// The API on one screen: New, NewClient (Config); Client.Obtain,
// TryObtain, Holder, HolderIn, Elide, Reentrant, Fair, Close; NewRedlock,
// NewMySQL; Lock.Release, ReleaseIn, Fence, Lost, Key, Owner; the Options
// (WithFamily, WithLabel, WithoutRenewal, WithoutFence, InTable,
// WithMaxWait, WithMaxHold); the errors (errors.go); Metrics.
//
// The guarantees, the Redis layout, how a resource checks a fence, and the
// limits are in docs/locking.md.
package lock
