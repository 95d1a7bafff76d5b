#!/usr/bin/env bash
# Installs what hangwatch needs, per purpose, and nothing more:
#   (no option)  the Debian packages that build it and run the demo, and the one source the
#                static collector compiles (simdjson's, below);
#   --tests      also what only the test suite uses (Chromium, Prometheus, clang, dpkg-dev, Slurm,
#                NVIDIA's cuobjdump and nvdisasm);
#   --torch      also the pinned PyTorch (scripts/torch-requirements.txt) in a venv of the deps
#                cache: $HANGWATCH_DEPS_CACHE/torch-venv (the torch e2e tests and bench run it).
# Idempotent: when everything is already there it prints nothing and touches nothing.
set -euo pipefail

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
tests=0
torch=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    --torch) torch=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-deps: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

packages=(
  cmake ninja-build g++ gdb python3
  libdw-dev libelf-dev elfutils
  zlib1g-dev liblzma-dev libbz2-dev  # the static archives libdw.a needs (static bin/forensics)
  libopenmpi-dev openmpi-bin
  libfmt-dev catch2 nlohmann-json3-dev libsimdjson-dev
  libbenchmark-dev             # bench/'s Google Benchmark programs are configured with the tree
)
if [ "$tests" -eq 1 ]; then
  packages+=(
    chromium fonts-dejavu-core   # the report's HTML page is checked with a headless screenshot
    clang libclang-rt-14-dev     # libFuzzer, for tests/fuzz/run.sh
    dpkg-dev                     # dpkg-shlibdeps, for the .deb's dependencies (cpack -G DEB)
    prometheus prometheus-node-exporter  # promtool and the live scrape in tests/e2e/test_prometheus.py
    slurmctld slurmd slurm-client munge  # a one-machine Slurm cluster: tests/e2e/slurm_cluster.py
    fuse3 libfuse3-dev pkg-config  # tests/programs/faultyfs.c: a dump folder that stalls or fails
    strace                       # tests/e2e/test_lookups.py counts the look-ups on the dump folder
  )
fi
if [ "$torch" -eq 1 ] && ! python3.11 -c 'import venv, ensurepip' 2>/dev/null; then
  packages+=(python3.11-venv)
fi

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
# source of the same version: 3.0.1, the .orig tarball Debian builds it from. apt fetches it
# from the archives this machine already uses (its own sources, turned into deb-src entries in
# a private list folder: the system's apt state is not touched) and checks it against the
# signed .dsc; the SHA-256 below is checked again. It stays in a cache outside the repository;
# CMake looks in the same place (HANGWATCH_DEPS_CACHE, CMakeLists.txt).
cache="${HANGWATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch}"
simdjson_dir="$cache/simdjson-3.0.1"
simdjson_version="3.0.1-1"
simdjson_sha256="156b1bc5eb0561b2bd166b46d191fd3d95a3e709cc63761477d3b7aec2b6e9ed"
fetch_debian_source() {  # package=version, into the current folder
  local apt_dir
  apt_dir=$(mktemp -d)
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts"
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    if [ -e "$f" ]; then sed -E 's/^Types:.*/Types: deb-src/' "$f" >"$apt_dir/parts/$(basename "$f")"; fi
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    if [ -e "$f" ]; then sed -n -E 's/^[[:space:]]*deb[[:space:]]+/deb-src /p' "$f" >>"$apt_dir/parts/from-lists.list"; fi
  done
  local apt_opts=(-q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/parts"
                  -o "Dir::State::Lists=$apt_dir/lists" -o "APT::Sandbox::User=$(id -un)")
  local ok=0
  # A configured archive without sources only warns; the package's absence is what fails.
  apt-get "${apt_opts[@]}" update >"$apt_dir/log" 2>&1 || true
  apt-get "${apt_opts[@]}" source --download-only "$1" >>"$apt_dir/log" 2>&1 || ok=$?
  [ "$ok" -eq 0 ] || cat "$apt_dir/log" >&2
  rm -rf "$apt_dir"
  return "$ok"
}
if [ ! -e "$simdjson_dir/.verified" ]; then
  echo "install-deps: fetching simdjson $simdjson_version's source (apt-get source) into $cache" >&2
  mkdir -p "$cache"
  download=$(mktemp -d "$cache/simdjson.XXXXXX")
  trap 'rm -rf "$download" "${log:-}"' EXIT
  if ! (cd "$download" && fetch_debian_source "simdjson=$simdjson_version"); then
    echo "install-deps: apt-get source simdjson=$simdjson_version failed (see above): the static collector" \
         "needs its source from the machine's Debian archive" >&2
    exit 1
  fi
  tarball="$download/simdjson_3.0.1.orig.tar.gz"
  if ! echo "$simdjson_sha256  $tarball" | sha256sum -c --quiet -; then
    echo "install-deps: $tarball does not have the SHA-256 of Debian's simdjson_$simdjson_version.dsc" >&2
    exit 1
  fi
  rm -rf "$simdjson_dir"
  tar -xzf "$tarball" -C "$cache" simdjson-3.0.1/singleheader simdjson-3.0.1/LICENSE
  rm -rf "$download"
  touch "$simdjson_dir/.verified"
fi

# NVIDIA's cuobjdump and nvdisasm, pinned (scripts/cuda-binutils-requirements.txt): the test
# that checks the cuda-gdb reader against the installed libnccl.so.2's real SASS. Only their
# two binaries are kept, in the cache; the marker is written last.
if [ "$tests" -eq 1 ]; then
  binutils_req="$here/cuda-binutils-requirements.txt"
  binutils_dir="$cache/cuda-binutils"
  want=$(sha256sum "$binutils_req" | cut -d' ' -f1)
  if [ "$(cat "$binutils_dir/.requirements-sha256" 2>/dev/null)" != "$want" ]; then
    echo "install-deps: fetching cuobjdump and nvdisasm (scripts/cuda-binutils-requirements.txt) into $binutils_dir" >&2
    rm -rf "$binutils_dir"
    mkdir -p "$binutils_dir/bin"
    wheels=$(mktemp -d)
    if ! python3 -m pip download --quiet --no-input --disable-pip-version-check --require-hashes --no-deps \
        --only-binary :all: --platform manylinux2014_x86_64 -r "$binutils_req" -d "$wheels" >"$wheels/log" 2>&1; then
      cat "$wheels/log" >&2
      echo "install-deps: pip could not download the pinned cuobjdump and nvdisasm (see above)" >&2
      exit 1
    fi
    for wheel in "$wheels"/*.whl; do
      python3 -m zipfile -e "$wheel" "$wheels/unpacked"
    done
    install -m 755 "$wheels"/unpacked/nvidia/*/bin/cuobjdump "$wheels"/unpacked/nvidia/*/bin/nvdisasm "$binutils_dir/bin/"
    rm -rf "$wheels"
    echo "$want" >"$binutils_dir/.requirements-sha256"
  fi
fi

# PyTorch, exactly as pinned (versions and hashes of torch and of everything it pulls in):
# the CUDA 13 build from PyPI, whose libtorch_cuda.so needs libcudart.so.13. A venv keeps the
# absolute path it was made at (its scripts' #! lines), so it is made in place, and the
# marker that says it is complete is written last: an interrupted install is made again, as
# is one from a changed requirements file.
if [ "$torch" -eq 1 ]; then
  requirements="$here/torch-requirements.txt"
  venv="$cache/torch-venv"
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ "$(cat "$venv/.requirements-sha256" 2>/dev/null)" != "$want" ]; then
    command -v python3.11 >/dev/null ||
      { echo "install-deps: --torch needs python3.11 (the pinned wheels are cp311)" >&2; exit 1; }
    echo "install-deps: installing PyTorch (scripts/torch-requirements.txt) into $venv" >&2
    rm -rf "$venv"
    mkdir -p "$cache"
    python3.11 -m venv "$venv"
    pip_log="$venv/pip.log"
    if ! "$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check --require-hashes \
        --only-binary :all: --no-deps -r "$requirements" >"$pip_log" 2>&1; then
      cat "$pip_log" >&2
      echo "install-deps: pip could not install the pinned PyTorch (see above)" >&2
      exit 1
    fi
    cudart=$(readelf -d "$venv"/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so 2>/dev/null |
      sed -n 's/.*NEEDED.*\[\(libcudart\.so\.[0-9]*\)\].*/\1/p')
    if [ "$cudart" != "libcudart.so.13" ]; then
      echo "install-deps: the pinned torch's libtorch_cuda.so needs '${cudart:-no libcudart}', not libcudart.so.13" >&2
      exit 1
    fi
    rm -f "$pip_log"
    echo "$want" >"$venv/.requirements-sha256"
  fi
fi
