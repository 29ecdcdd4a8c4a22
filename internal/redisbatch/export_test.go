package redisbatch

// ShareKeys turns the sharing of an earlier call's keys (pack) off and on,
// for the benchmark comparing both in one run.
func ShareKeys(on bool) { shareKeys = on }
