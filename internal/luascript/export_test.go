package luascript

// ShareKeys turns the sharing of an earlier call's keys (Pack) off and on,
// for BenchmarkMerged_sharedKeys_redisCPU.
func ShareKeys(on bool) { shareKeys = on }
