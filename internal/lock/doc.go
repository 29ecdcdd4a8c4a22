// Package lock provides the Redis locks flashsale stands on.
//
// The mutex (Client.TryObtain, Client.Obtain) has owner tokens of 128 random
// bits with holder metadata, owner-checked release and renewal in Lua, a
// watchdog that renews every ttl/3 and closes Lost when the lock is gone or
// its validity runs out unrenewed, waiting without polling (a local queue per
// key plus a pub/sub release notice, every wait bounded), and a fencing token
// per hold that a resource uses to refuse a stale holder. A caller's own Lua
// can ride on the obtain (a Guard) and the release (a Finish); a lock needed
// only for such one step in Redis can be deferred to it (Client.Defer) and
// is then not taken at all when nobody holds it (lock elision, elide.go).
//
// The guarantees, the Redis layout, how a resource checks a fence, and the
// limits are in docs/locking.md.
package lock
