#!/usr/bin/env bash
# orderpath.sh: the order path alone, for before/after comparisons of one
# change (check out each commit and run it; same machine, one after the
# other). One api of the load-test kit's stack (real redis-server and
# mariadbd), default settings except the per-IP limit (every client here is
# 127.0.0.1), no worker; a 10,000,000-unit sale, 50,000 users' tokens, and
# RUNS runs of wrk -t2 -c64 for SECONDS each with internal/loadtest/wrk/orders.lua.
# Prints one FLASHSALE line per run (requests, seconds, p50/p90/p99 in µs).
#
#   bench/orderpath.sh [label]          RUNS=3 SECONDS_EACH=15 by default
#   DEBUG_ADDR=127.0.0.1:6060 bench/orderpath.sh   # then: curl -o cpu.prof \
#       'http://127.0.0.1:6060/debug/pprof/profile?seconds=10' during a run
set -euo pipefail
label=${1:-run}
runs=${RUNS:-3}
secs=${SECONDS_EACH:-15}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
stack=
trap '[ -n "$stack" ] && { kill -INT $stack 2>/dev/null; wait $stack 2>/dev/null; }; rm -rf "$tmp"' EXIT
go build -o "$tmp/loadtest" ./cmd/loadtest
go build -o "$tmp/api" ./cmd/api
"$tmp/loadtest" -stack-only -apis 1 -workers 0 >"$tmp/stack.out" 2>&1 &
stack=$!
for _ in $(seq 120); do grep -q '^URL=' "$tmp/stack.out" && break; sleep 1; done
grep -q '^URL=' "$tmp/stack.out" || { cat "$tmp/stack.out" >&2; exit 1; }
eval "$(grep -E '^(URL|ADMIN_TOKEN|JWT_SECRET)=' "$tmp/stack.out")"
export JWT_SECRET
auth="Authorization: Bearer $ADMIN_TOKEN"
id=$(curl -sf -X POST "$URL/admin/v1/activities" -H "$auth" -d "{\"type\":\"seckill\",\"name\":\"bench\",
  \"sku\":\"B1\",\"price_cents\":100,\"total_stock\":10000000,\"per_user_limit\":100,
  \"starts_at\":\"$(date -u +%FT%TZ)\",\"ends_at\":\"$(date -u -d '+1 hour' +%FT%TZ)\"}" | jq .id)
curl -sf -X POST "$URL/admin/v1/activities/$id/publish" -H "$auth" >/dev/null
"$tmp/api" token --users 50000 >"$tmp/tokens.txt"
sleep 2
for r in $(seq "$runs"); do
  wrk -t2 -c64 -d"${secs}s" -s internal/loadtest/wrk/orders.lua "$URL" -- "$id" "$tmp/tokens.txt" |
    grep FLASHSALE | sed "s/^/$label run $r: /"
done
