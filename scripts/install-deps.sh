#!/usr/bin/env bash
# Installs the Debian packages hangwatch builds and tests with, and fetches the one
# source the static collector compiles (below). Idempotent: when everything is already
# there it prints nothing and touches nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ gdb python3
  libdw-dev libelf-dev elfutils
  zlib1g-dev liblzma-dev libbz2-dev  # the static archives libdw.a needs (static bin/forensics)
  curl                         # fetches simdjson's source (below)
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
if [ ${#missing[@]} -gt 0 ]; then
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
fi

# Debian ships simdjson only as a shared library, so the static bin/forensics compiles the
# source of the same version (3.0.1, the .orig tarball Debian builds it from, checked
# against the SHA-256 in Debian's simdjson_3.0.1-1.dsc). It stays in a cache outside the
# repository; CMake looks in the same place (HANGWATCH_DEPS_CACHE, CMakeLists.txt).
cache="${HANGWATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch}"
simdjson_dir="$cache/simdjson-3.0.1"
simdjson_url="http://deb.debian.org/debian/pool/main/s/simdjson/simdjson_3.0.1.orig.tar.gz"
simdjson_sha256="156b1bc5eb0561b2bd166b46d191fd3d95a3e709cc63761477d3b7aec2b6e9ed"
if [ ! -e "$simdjson_dir/.verified" ]; then
  echo "install-deps: fetching simdjson 3.0.1's source into $cache" >&2
  mkdir -p "$cache"
  tarball=$(mktemp "$cache/simdjson.XXXXXX")
  trap 'rm -f "$tarball" "${log:-}"' EXIT
  curl -fsSL --retry 3 -o "$tarball" "$simdjson_url"
  if ! echo "$simdjson_sha256  $tarball" | sha256sum -c --quiet -; then
    echo "install-deps: $simdjson_url does not have the SHA-256 Debian lists for it" >&2
    exit 1
  fi
  rm -rf "$simdjson_dir"
  tar -xzf "$tarball" -C "$cache" simdjson-3.0.1/singleheader simdjson-3.0.1/LICENSE
  touch "$simdjson_dir/.verified"
fi
