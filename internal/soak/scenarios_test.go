//go:build scenarios

package soak_test

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/soak"
)

// The network's faults one at a time, each a soak of its own with the
// shoppers buying, paying, cancelling, timing out and joining groups
// throughout (REDIS_ACK_REPLICAS=1, sentinels), every invariant, answer
// bound, recovery bound and porcupine's check after: `make test-network`
// (ten short soaks, not yet timed as a whole; `make test` runs every kind
// once, short).

func scenario(t *testing.T, kinds []string, load, faultFor time.Duration) {
	rep := runSoak(t, soak.Options{Duration: load, FaultEvery: 6 * time.Second, Clients: 16,
		Network: true, Only: kinds, NetFaultFor: faultFor})
	for _, k := range kinds {
		if rep.FaultsByKind()[k] == 0 {
			t.Errorf("no %q fault", k)
		}
	}
}

// An api cut from the Redis primary for 10 s, then healed: it answers 503
// with Retry-After meanwhile (within REQUEST_TIMEOUT), the other api sells.
func TestScenario_apiCutFromRedisPrimary(t *testing.T) {
	scenario(t, []string{soak.CutAPIRedis}, 90*time.Second, 10*time.Second)
}

// An api's link to the Redis primary cut one way for 10 s: its scripts
// run, their replies are lost; what it sends again answers as the first
// run did, and no order is made twice.
func TestScenario_apiRepliesFromRedisLost(t *testing.T) {
	scenario(t, []string{soak.RepliesLost}, 90*time.Second, 10*time.Second)
}

// Split brain: the primary with one api and one worker on one side, the
// replica, the sentinels and the others on the other; the replica
// promoted; healed, the old primary a replica again, what it alone took
// dropped — and none of it was answered 2xx.
func TestScenario_splitBrain(t *testing.T) {
	scenario(t, []string{soak.SplitBrain}, 90*time.Second, 10*time.Second)
}

// A worker cut from MariaDB mid-batch, and from Redis with a batch read.
func TestScenario_workerCutFromMySQLAndRedis(t *testing.T) {
	scenario(t, []string{soak.CutWorkerMySQL, soak.CutWorkerRedis}, 90*time.Second, 10*time.Second)
}

// The replica cut from the primary: nothing can be acknowledged.
func TestScenario_replicationCut(t *testing.T) {
	scenario(t, []string{soak.CutReplication}, 60*time.Second, 10*time.Second)
}

// 50–200 ms on every link, each way, for a minute.
func TestScenario_latencyOnEveryLinkForAMinute(t *testing.T) {
	scenario(t, []string{soak.SlowLinks}, 90*time.Second, time.Minute)
}

// Every link held to 32 KB/s each way.
func TestScenario_bandwidthLimited(t *testing.T) {
	scenario(t, []string{soak.NarrowLinks}, 60*time.Second, 10*time.Second)
}

// Connections reset at random on every link.
func TestScenario_connectionsReset(t *testing.T) {
	scenario(t, []string{soak.ResetLinks}, 60*time.Second, 8*time.Second)
}

// Redis replies cut in half: the client sees a broken reply to a script
// that ran, and go-redis sends it again.
func TestScenario_redisRepliesCutInHalf(t *testing.T) {
	scenario(t, []string{soak.HalfReplies}, 60*time.Second, 8*time.Second)
}
