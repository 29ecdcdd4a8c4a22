#!/usr/bin/env bash
# orderpath.sh: the order path alone, for before/after comparisons of one
# change (check out each commit and run it; same machine, one after the
# other). One api of the load-test kit's stack (real redis-server and
# mariadbd), default settings except the per-IP limit (every client here is
# 127.0.0.1), no worker; a 10,000,000-unit sale, 50,000 users' tokens, and
# RUNS runs of wrk -t2 -c64 for SECONDS each with internal/loadtest/wrk/orders.lua.
# Prints one FLASHSALE line per run (requests, seconds, p50/p90/p99 in µs)
# and one COST line: CPU per accepted order, in µs, of redis-server's main
# thread (INFO cpu) and of the api process (/proc/<pid>/stat), over the run
# and, with WORKERS=1, the SETTLE seconds after it in which the worker
# catches up (its Redis work counted, its own CPU not).
#
#   bench/orderpath.sh [label]          RUNS=3 SECONDS_EACH=15 WORKERS=0 by default
#   WORKERS=1 SETTLE=5 bench/orderpath.sh   # the worker persisting meanwhile
#   DEBUG_ADDR=127.0.0.1:6060 bench/orderpath.sh   # then: curl -o cpu.prof \
#       'http://127.0.0.1:6060/debug/pprof/profile?seconds=10' during a run
set -euo pipefail
label=${1:-run}
runs=${RUNS:-3}
secs=${SECONDS_EACH:-15}
workers=${WORKERS:-0}
settle=${SETTLE:-$([ "$workers" -gt 0 ] && echo 5 || echo 0)}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
stack=
trap '[ -n "$stack" ] && { kill -INT $stack 2>/dev/null; wait $stack 2>/dev/null; }; rm -rf "$tmp"' EXIT
go build -o "$tmp/loadtest" ./cmd/loadtest
go build -o "$tmp/api" ./cmd/api
"$tmp/loadtest" -stack-only -apis 1 -workers "$workers" >"$tmp/stack.out" 2>&1 &
stack=$!
for _ in $(seq 120); do grep -q '^URL=' "$tmp/stack.out" && break; sleep 1; done
grep -q '^URL=' "$tmp/stack.out" || { cat "$tmp/stack.out" >&2; exit 1; }
eval "$(grep -E '^(URL|ADMIN_TOKEN|JWT_SECRET|REDIS_URL)=' "$tmp/stack.out")"
api_pid=$(ss -ltnpH "sport = :${URL##*:}" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
# redis_cpu: main-thread CPU seconds so far; api_cpu: the api's, in clock ticks (1/100 s).
redis_cpu() { redis-cli -u "$REDIS_URL" INFO cpu | tr -d '\r' |
  awk -F: '/^used_cpu_(user|sys)_main_thread:/ { s += $2 } END { printf "%.6f", s }'; }
api_cpu() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$api_pid/stat"; }
export JWT_SECRET
auth="Authorization: Bearer $ADMIN_TOKEN"
id=$(curl -sf -X POST "$URL/admin/v1/activities" -H "$auth" -H 'Content-Type: application/json' -d "{\"type\":\"seckill\",\"name\":\"bench\",
  \"sku\":\"B1\",\"price_cents\":100,\"total_stock\":10000000,\"per_user_limit\":100,
  \"starts_at\":\"$(date -u +%FT%TZ)\",\"ends_at\":\"$(date -u -d '+1 hour' +%FT%TZ)\"}" | jq .id)
curl -sf -X POST "$URL/admin/v1/activities/$id/publish" -H "$auth" >/dev/null
"$tmp/api" token --users 50000 >"$tmp/tokens.txt"
sleep 2
for r in $(seq "$runs"); do
  r0=$(redis_cpu) a0=$(api_cpu)
  out=$(wrk -t2 -c64 -d"${secs}s" -s internal/loadtest/wrk/orders.lua "$URL" -- "$id" "$tmp/tokens.txt" | grep FLASHSALE)
  a1=$(api_cpu)
  sleep "$settle"
  r1=$(redis_cpu)
  echo "$out" | sed "s/^/$label run $r: /"
  n=$(echo "$out" | sed 's/^FLASHSALE //' | jq '.codes["202"] // 0')
  awk -v l="$label" -v r="$r" -v n="$n" -v r0="$r0" -v r1="$r1" -v a0="$a0" -v a1="$a1" -v w="$workers" 'BEGIN {
    printf "%s run %d: COST redis %.1f µs/order (workers %d), api %.1f µs/order, %d orders\n",
      l, r, (r1 - r0) * 1e6 / n, w, (a1 - a0) * 1e4 / n, n }'
done
