# flashsale: one image with both binaries, /usr/local/bin/api (the entrypoint)
# and /usr/local/bin/worker (docker-compose.yml sets it as the worker's
# entrypoint). Static binaries (CGO_ENABLED=0) on distroless/static: no
# shell, no package manager, no libc; it runs as the non-root user 65532.
# Health checks are the binaries' own `api healthcheck` / `worker healthcheck`
# (there is no curl); they are set per service in docker-compose.yml, not
# here, because one image runs both programs on different ports.
#
# deploy/dockerfile_test.go replays this stage's context and commands with the
# local Go toolchain (there is no Docker engine in CI) and checks the result.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0
# Dependencies first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
# Only what the binaries are built from (.dockerignore also leaves out tests).
COPY cmd/ cmd/
COPY internal/ internal/
COPY migrations/ migrations/
RUN go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/api ./cmd/worker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/api /out/worker /usr/local/bin/
# 65532 is distroless's "nonroot"; numeric so that runAsNonRoot checks
# (Kubernetes) can verify it without reading /etc/passwd.
USER 65532:65532
# HTTP_ADDR (api) and WORKER_HTTP_ADDR (worker) defaults.
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/api"]
