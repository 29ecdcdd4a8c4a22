#!/usr/bin/env bash
# Makes sure the server binaries the tests start for themselves are installed:
# redis-server and mariadbd. The tests never use the machine's running
# services; they start throwaway processes on free ports (internal/testenv).
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
if ! command -v mariadbd >/dev/null 2>&1 && [[ ! -x /usr/sbin/mariadbd ]]; then
  need+=(mariadb-server)
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
