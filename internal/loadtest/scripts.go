package loadtest

import _ "embed"

// WrkOrders is wrk/orders.lua: a wrk script that places orders rotating
// through many users' tokens (usage in its header).
//
//go:embed wrk/orders.lua
var WrkOrders string
