package lock

// The table lock's merged scripts, for the Redis-cost benchmark of the
// external test package (which uses internal/loadtest, itself a user of
// this package).
var (
	TableObtainMerged  = tableObtainMerged
	TableReleaseMerged = tableReleaseMerged
	MetaSep            = metaSep
	// TableElidedMerged is table_elide.lua with no guard and a finish that
	// does nothing: the elided form of an obtain and release.
	TableElidedMerged = NewBatchFinish("local o = {} for i = 1, calls.n do o[i] = false end return o").elision(nil).table
)
