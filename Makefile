# flashsale: the two commands are `make run` (the service) and `make test` (all tests).

GO        ?= go
PKGS      ?= ./...
BENCHTIME ?= 3s

.PHONY: run test lint vet fmt-check build bench bench-lock-core

## run: start the API (see README for configuration)
run:
	$(GO) run ./cmd/api

## test: install missing test servers, check formatting, vet, and run every test with -race
test: lint
	@scripts/ensure-test-servers.sh
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

lint: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/...

## bench-lock-core: the mutex benchmarks (ours vs the SETNX+sleep seed recipe), written up in docs/benchmarks.md
bench-lock-core:
	@scripts/ensure-test-servers.sh
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count 1 ./internal/lock/
