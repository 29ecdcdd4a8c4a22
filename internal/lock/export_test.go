package lock

// The table lock's merged scripts, for the Redis-cost benchmark of the
// external test package (which uses internal/loadtest, itself a user of
// this package).
var (
	TableObtainMerged  = tableObtainMerged
	TableReleaseMerged = tableReleaseMerged
	MetaSep            = metaSep
)

// LocalQueued is how many of c's waiters queue at its gates behind a local
// holder: tests wait for it instead of sleeping and hoping they queued.
func LocalQueued(c *Client) int {
	c.gates.mu.Lock()
	defer c.gates.mu.Unlock()
	n := 0
	for _, g := range c.gates.gates {
		g.mu.Lock()
		n += len(g.queue)
		g.mu.Unlock()
	}
	return n
}
