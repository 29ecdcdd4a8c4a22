#!/usr/bin/env bash
# Makes sure the programs the tests start for themselves are installed:
# redis-server and mariadbd (throwaway servers, internal/testenv), nginx,
# wrk and ab (the load-test kit and the embedded mode's printed commands),
# curl, docker-compose (validates docker-compose.yml; there is no Docker
# engine here), and chromium (the admin console's browser tests drive it
# headless with chromedp), stripe-mock (the Stripe adapter's tests),
# toxiproxy-server (the network faults' proxy), helm (the Kubernetes chart)
# and prometheus with promtool (the alerting rules). The
# tests never use the machine's running services.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [[ -x /usr/sbin/$1 ]]; }
have redis-server || need+=(redis-server)
have mariadbd || need+=(mariadb-server)
have nginx || need+=(nginx-light)
have wrk || need+=(wrk)
have ab || need+=(apache2-utils)
have curl || need+=(curl)
have docker-compose || need+=(docker-compose)
have chromium || have chromium-browser || have google-chrome || need+=(chromium)
# prometheus and promtool: the alerting rules are checked and unit-tested by
# promtool, and fired by a real Prometheus scraping a real api and worker.
{ have prometheus && have promtool; } || need+=(prometheus)
# stripe-mock: Stripe's mock of its API, a Go program (internal/testenv's
# StripeMockVersion), built from its module into $(go env GOPATH)/bin, where
# the tests look for it.
STRIPE_MOCK_VERSION=v0.203.0
gobin="$(${GO:-go} env GOPATH)/bin"
if ! have stripe-mock && [[ ! -x "$gobin/stripe-mock" ]]; then
  echo "make test: installing stripe-mock $STRIPE_MOCK_VERSION (go install)"
  ${GO:-go} install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION"
fi

# helm: renders and lints the Kubernetes chart (deploy/helm), built from
# its module into $(go env GOPATH)/bin (a few minutes, once).
HELM_VERSION=v3.22.0
if ! have helm && [[ ! -x "$gobin/helm" ]]; then
  echo "make test: installing helm $HELM_VERSION (go install)"
  ${GO:-go} install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

# toxiproxy-server: Shopify's fault-injection proxy (internal/testenv's
# Network), built from the version go.mod's tool line pins, so the server
# and the client library the tests use are one release.
if ! have toxiproxy-server && [[ ! -x "$gobin/toxiproxy-server" ]]; then
  echo "make test: building toxiproxy-server (go build, the version in go.mod)"
  ${GO:-go} build -o "$gobin/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server
fi

((${#need[@]} == 0)) && exit 0

echo "make test: ${need[*]} missing; installing with apt-get"
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"; }; then
  echo "make test: could not install ${need[*]}. Install them (apt-get install ${need[*]}) and run make test again." >&2
  exit 1
fi
