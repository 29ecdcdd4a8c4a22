# flashsale: the two commands are `make run` (the service) and `make test` (all tests).

GO        ?= go
PKGS      ?= ./...
BENCHTIME ?= 3s

.PHONY: run test lint openapi-lint vet fmt fmt-check tidy build bench-lock bench-strategy bench-durability bench-rediscost bench-hotsale bench-webhooks bench-deliveries bench-waitingroom bench-sse bench-outbox loadtest soak test-network test-webhooks test-embedded-100k fuzz fuzz-short

# FUZZ_TARGETS: every fuzz target, as "package:Target". Their corpora are
# committed under each package's testdata/fuzz/ and run by every go test.
FUZZ_TARGETS = \
	./internal/httpapi:FuzzOrderBody \
	./internal/httpapi:FuzzParseOrderBody \
	./internal/jsonw:FuzzAppendString \
	./internal/jsonw:FuzzAppendUTCMillis \
	./internal/httpapi:FuzzActivityBody \
	./internal/httpapi:FuzzActivityPatch \
	./internal/auth:FuzzVerify \
	./internal/tasks:FuzzParseBatchPayload \
	./internal/order:FuzzParseNo \
	./internal/redisstore:FuzzScripts
FUZZTIME       ?= 1m
FUZZTIME_SHORT ?= 8s

# API_BIN: where make run builds the API.
API_BIN ?= bin/api

## run: build the API into API_BIN, saying so first (a first build takes a
## minute or so), then start it (see docs/config.md for configuration; with no
## REDIS_URL/MYSQL_DSN it runs in embedded mode)
run:
	@echo "make run: building ./cmd/api into $(API_BIN) (a first build takes a minute or so; later ones are quick) ..."
	@$(GO) build -o $(API_BIN) ./cmd/api
	@echo "make run: built; starting $(API_BIN)"
	@exec $(API_BIN)

## test: install missing test servers, check formatting, vet, and run every test with -race
## (the benchmark module's too: the seed recipe its figures compare against must be correct).
## -parallel 4: only internal/app's waiting tests run in parallel (its waits(t); docs/testing.md)
test: lint
	@scripts/ensure-test-servers.sh
	$(GO) test -race -count=1 -parallel 4 -timeout 25m $(PKGS)
	cd bench && $(GO) test -race -count=1 -timeout 5m ./strategy/ ./internal/rediscost/
	@$(MAKE) --no-print-directory fuzz-short

## fuzz: run every fuzz target for FUZZTIME (default 1m) each; a failing
## input is written to the package's testdata/fuzz/ (commit it with the fix).
## scripts/fuzz.sh runs a target again once when Go's fuzzer stops on its
## own -fuzztime race with nothing found (golang/go#75804)
fuzz:
	@scripts/ensure-test-servers.sh
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		GO=$(GO) scripts/fuzz.sh $${t%%:*} $${t#*:} $(FUZZTIME) || exit 1; \
	done

## fuzz-short: the same, briefly (part of make test)
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

## lint: gofmt, go vet, and the API contract's linter (part of make test)
lint: fmt-check vet openapi-lint

# REDOCLY is the OpenAPI linter that openapi-lint runs, pinned (the version
# and its hash) in tools/redocly/package-lock.json and installed there with
# npm ci from the npm registry the first time, or when the lock changes: a
# fresh machine needs only Node.js (20.19+) and npm. On Node.js 20 it prints
# a notice that its later versions need 22; this one runs on 20.
REDOCLY = tools/redocly/node_modules/.bin/redocly

## openapi-lint: redocly lint on internal/httpapi/openapi.yaml, the
## recommended ruleset with warnings as errors (internal/httpapi/redocly.yaml;
## what it ignores, each with its reason: .redocly.lint-ignore.yaml there)
openapi-lint: $(REDOCLY)
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(REDOCLY) lint \
		--config internal/httpapi/redocly.yaml internal/httpapi/openapi.yaml

$(REDOCLY): tools/redocly/package.json tools/redocly/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "make lint: npm is missing: install Node.js 20.19+ and npm (apt-get install nodejs npm)" >&2; exit 1; }
	npm ci --prefix tools/redocly --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

fmt:
	gofmt -w $$(find . -name '*.go' -not -path './.git/*')

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	cd bench && $(GO) vet ./...

## tidy: go mod tidy for both modules. bench/ needs -e: redsync's own tests
## import github.com/redis/rueidis/rueidiscompat@v1.0.79, which the module
## proxy refuses (403); nothing we build uses it.
tidy:
	$(GO) mod tidy
	cd bench && $(GO) mod tidy -e

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/...

## bench-lock: our locks vs the seed recipes vs bsm/redislock and redsync, one run; see docs/benchmarks.md
bench-lock:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count 1 ./lock/

## bench-strategy: the order path against a bare Lua decrement, the seed
## recipe and the fair lock, fresh shoppers and the whole system at a launch
## (CPU per order by process), plus sold-out vs hello, persistence rate and
## memory, in one run on real processes; STRATEGY_FLAGS=-launch runs the
## launch's rows alone (about 10 minutes); STRATEGY_FLAGS="-launch -baseline DIR"
## adds the whole system built at another commit (git worktree add DIR COMMIT),
## run for run beside this one; -hooks=false leaves out the webhook rows;
## -profile DIR writes the fresh-shopper api's CPU and allocation profiles
## over (f)'s first run (its figures then include the profiler's cost);
## see docs/benchmarks.md
bench-strategy:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) run ./strategy $(STRATEGY_FLAGS)

## bench-rediscost: Redis main-thread CPU per accepted order, phase by
## phase (rate limit, lock, accept, relay, worker); see docs/benchmarks.md
bench-rediscost:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) run ./rediscost $(REDISCOST_FLAGS)

## bench-waitingroom: the waiting room: Redis memory per waiting shopper and
## Redis CPU per poll, N shoppers (WAITINGROOM_N, default 200000); see docs/benchmarks.md
WAITINGROOM_N ?= 200000
bench-waitingroom:
	@scripts/ensure-test-servers.sh
	WAITINGROOM_N=$(WAITINGROOM_N) $(GO) test -tags waitingroombench -count=1 -run TestBench -v -timeout 30m ./internal/waitingroom/

## bench-outbox: what persisting an order costs MariaDB, item by item: the
## worker's writes (orders and their events), the dispatcher's reads and
## marks and its skip (OUTBOX_N orders, default 40000), the least a row
## costs (plain INSERTs into copies of orders with its keys and with its
## primary key alone), and with OUTBOX_KEYS="table.key ..."
## the worker's write with and without those keys, alternated;
## see docs/benchmarks.md
OUTBOX_N ?= 40000
bench-outbox:
	@scripts/ensure-test-servers.sh
	OUTBOX_N=$(OUTBOX_N) $(GO) test -tags outboxbench -count=1 -run TestBenchOutbox -v -timeout 30m ./internal/mysqlstore/

## bench-deliveries: the shop's webhooks delivered by one worker: order
## events appended to the outbox, dispatched, signed and sent to a receiver
## that verifies each; deliveries/s and the worker's and Redis's CPU per
## delivery, for one endpoint and four (DELIVERIES_FLAGS: -events); see
## docs/benchmarks.md
bench-deliveries:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) run ./deliveries $(DELIVERIES_FLAGS)

## bench-sse: SSE_STREAMS (default 20,000) open order streams on one api
## process: its RSS, what Redis runs while they idle, and the latency from a
## publish to the client at a steady SSE_RATE events a second; see
## docs/benchmarks.md
SSE_STREAMS ?= 20000
SSE_RATE ?= 1000
bench-sse:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) run ./sse -streams $(SSE_STREAMS) -rate $(SSE_RATE) $(SSE_FLAGS)

## bench-hotsale: one hot flash sale on a 3-master Redis Cluster with its
## stock in 1, 3 and 6 shards, and a control of 3 one-shard sales, side by
## side over HOTSALE_ROUNDS rounds: each master's main-thread CPU per order
## and busy share, throughput, p99; see docs/benchmarks.md
HOTSALE_ORDERS ?= 60000
HOTSALE_ROUNDS ?= 3
bench-hotsale:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) test -run '^$$' -bench HotSale -benchtime $(HOTSALE_ORDERS)x -count 1 -timeout 30m ./hotsale/ -hotsale.rounds $(HOTSALE_ROUNDS)

## bench-durability: what durability costs on the order path: appendfsync
## everysec vs always, and a replica with REDIS_ACK_REPLICAS 0 vs 1, in one
## run; see docs/benchmarks.md
bench-durability:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) run ./durability $(DURABILITY_FLAGS)

## bench-webhooks: the payment provider's confirmations through one api
## (signed webhooks, each paying its order) with a worker persisting
## meanwhile, then their replays; see docs/benchmarks.md
bench-webhooks:
	@scripts/ensure-test-servers.sh
	cd bench && $(GO) run ./webhooks $(WEBHOOKS_FLAGS)

## loadtest: a stack of real processes (redis-server, mariadbd, 3 api behind
## nginx, 2 workers), wrk with rotating users and ab, then the invariants.
## LOADTEST_FLAGS passes options, e.g. LOADTEST_FLAGS="-duration 60s -conns 128"
## or LOADTEST_FLAGS="-url http://host:8080 -admin-token … -jwt-secret …".
loadtest:
	@scripts/ensure-test-servers.sh
	$(GO) run ./cmd/loadtest $(LOADTEST_FLAGS)

## soak: the fault soak: shoppers on four flash sales (one in shards, one of
## three items restocked and paused, one behind a waiting room) and two
## group buys at once against a stack of real processes (2 api behind nginx, 2 workers,
## a Redis primary with a replica and three sentinels, mariadbd) for an hour
## while an api or a worker is killed -9, Redis paused, MariaDB stopped and
## the Redis primary killed -9 and failed over, at random; invariants checked
## every few seconds and in full once settled. It prints its seed and every
## fault; exits 1 if an invariant broke. A version with 55 s of load runs in
## make test (internal/soak). SOAK_FLAGS passes options, e.g.
## SOAK_FLAGS="-duration 10m -fault-every 5s", SOAK_FLAGS="-seed 1234" to
## replay, SOAK_FLAGS="-sentinel=false" for one redis-server, no failovers,
## or SOAK_FLAGS="-network" for the network's faults too (every link through
## toxiproxy: partitions, split brain, latency, resets, replies cut; root).
## The flash sales' histories are checked by porcupine at the end.
soak:
	@scripts/ensure-test-servers.sh
	$(GO) run ./cmd/soak $(SOAK_FLAGS)

## test-webhooks: the events of 20,000 real orders (placed, paid, cancelled, timed
## out, in groups that succeed and fail) from the worker's producers to a real
## receiver process that answers 500s, answers too slowly, is killed -9
## mid-request and stays down a minute: every event delivered, none
## invented, every order's sequence complete (make test runs 1,000 orders,
## 5 s down); see docs/webhooks.md
test-webhooks:
	@scripts/ensure-test-servers.sh
	WEBHOOK_TEST_ORDERS=20000 WEBHOOK_TEST_DOWN=60 $(GO) test -count=1 -timeout 30m -v \
		-run 'TestWebhooks_receiverFailsSlowsAndDies' ./internal/app/

## test-embedded-100k: a 100,000-unit sale in embedded mode (redis-server and
## mariadbd as the api's child processes): sold out by wrk with fresh users,
## every order persisted exactly once, the public view, an admin view and
## /readyz answering 200 every second throughout. It logs the sell-out and the
## drain; docs/benchmarks.md has its result. Without -race, which slows the
## api several times over: the figures are the service's. make test runs the
## same test with 20,000 units.
test-embedded-100k:
	@scripts/ensure-test-servers.sh
	FLASHSALE_EMBEDDED_SALE=100000 $(GO) test -count=1 -timeout 30m -run 'TestEmbedded_bigSale' -v ./internal/app/

## test-network: the network's faults one at a time, each a short soak on a
## toxiproxy network (an api cut from the Redis primary, split brain, a
## worker cut from MariaDB and Redis, the replication link cut, a minute of
## latency, resets, replies cut in half), every invariant and porcupine's
## check after (not yet timed as a whole: ten short soaks). make test runs every kind once, short.
test-network:
	@scripts/ensure-test-servers.sh
	$(GO) test -tags scenarios -count=1 -timeout 60m -run 'TestScenario' -v ./internal/soak/
