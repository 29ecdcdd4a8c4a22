package lock

// The table lock's merged scripts, for the Redis-cost benchmark of the
// external test package (which uses internal/loadtest, itself a user of
// this package).
var (
	TableObtainMerged  = tableObtainMerged
	TableReleaseMerged = tableReleaseMerged
	MetaSep            = metaSep
)
