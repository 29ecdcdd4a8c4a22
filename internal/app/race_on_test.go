//go:build race

package app_test

// raceOn: the race detector is on (make test). It slows go-mysql-server, a
// pure-Go SQL server, many times over: the embedded memory sale's drain.
const raceOn = true
