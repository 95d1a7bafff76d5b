#!/usr/bin/env bash
# Installs the Debian packages hangwatch builds and tests with. Idempotent: when
# everything is already there it prints nothing and touches nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ gdb python3
  libdw-dev libelf-dev elfutils
  libopenmpi-dev openmpi-bin
  libfmt-dev catch2 nlohmann-json3-dev
  libbenchmark-dev libsimdjson-dev
  chromium fonts-dejavu-core  # the report's HTML page is checked with a headless screenshot
  clang libclang-rt-14-dev     # libFuzzer, for tests/fuzz/run.sh
  dpkg-dev                     # dpkg-shlibdeps, for the .deb's dependencies (cpack -G DEB)
  prometheus prometheus-node-exporter  # promtool and the live scrape in tests/e2e/test_prometheus.py
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# apt's chatter only matters when it fails.
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: apt-get failed (see above)" >&2
  exit 1
fi
