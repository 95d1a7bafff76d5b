#!/usr/bin/env bash
# Installs the Debian packages hangwatch builds and tests with. Idempotent: when
# everything is already there it prints nothing and touches nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ gdb python3
  libunwind-dev libdw-dev elfutils
  libopenmpi-dev openmpi-bin
  libboost-dev libfmt-dev catch2 nlohmann-json3-dev
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
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
