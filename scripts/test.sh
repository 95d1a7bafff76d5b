#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds, and runs every test suite:
#   1. the end-to-end suite on a RelWithDebInfo build (the builds of 2, 3 and 4 compile beside it),
#   2. the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer,
#   3. the concurrent parts (streams, events, ring collectives, the watchdog's poller)
#      under ThreadSanitizer,
#   4. the build against the real CUDA 13 / cuBLAS / NCCL in /usr/local/cuda
#      (HANGWATCH_REAL_CUDA=ON) and the CPU-only part of the GPU suite (tests/gpu/run.sh):
#      that ring_train, healthy and hung, through simgpu's drop-in libraries.
# --quick runs only the whole suite (unit + end-to-end) on the RelWithDebInfo build.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh --tests
# PyTorch (~3 GB from PyPI) downloads and unpacks while the first builds compile; the full
# suite waits for it, and its torch tests fail instead of skipping without it.
torch_log=$(mktemp)
trap 'rm -f "$torch_log"' EXIT
scripts/install-deps.sh --torch >"$torch_log" 2>&1 &
torch_install=$!
wait_for_torch() {
  if ! wait "$torch_install"; then
    cat "$torch_log" >&2
    echo "test.sh: scripts/install-deps.sh --torch failed (see above)" >&2
    exit 1
  fi
  cat "$torch_log" >&2
}
export HANGWATCH_REQUIRE_TORCH=1
export HANGWATCH_REQUIRE_SLURM=1  # installed above: the real-Slurm tests fail rather than skip
export HANGWATCH_REQUIRE_CUOBJDUMP=1  # likewise cuobjdump: the cuda-gdb reader against NCCL's real SASS
jobs=$(nproc)

configure_and_build() {  # dir, extra cmake args..., then targets after --
  local dir=$1; shift
  local args=() targets=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targets=("$@")
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANGWATCH_UNITY_BUILD=ON "${args[@]}" >/dev/null
  ninja -C "$dir" "${targets[@]}"
}

# unit_tests builds every area's test program (tests/unit/CMakeLists.txt).
unit_targets=(unit_tests forensics)

tsan_tests() {
  # Left to the ASan pass: TSan cannot start threads in the child of a forked multi-threaded
  # process nor run a signal handler there as the kernel does, and its instrumented memcpy is
  # slower than the modeled copy and link times. Nor does it run the I/O helper's SIGHUP
  # handler while the helper is blocked in an open() it does not count as blocking (the
  # bound after the rank's end).
  # atexit_sleep_ms=0: by default TSan sleeps 1 s in every exiting process, for a race with a
  # thread still running then; each multi-rank test forks a process per rank, so that sleep was
  # half of this pass (179 s -> 90 s). The races looked for are those during the work, which
  # every test waits for before it exits.
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=0 \
    ctest --test-dir build-tsan -R '^(simcuda|simnccl|watchdog)\.' \
      -E 'ForkChildCanUseTheRuntime|AForkedChildOfAnArmedProcess|CopyTakesModeledTime|SlowRankMakesCopiesSlower|SlowLinkStretches|NotFinishAfterTheRankEnded' -j "$jobs" --output-on-failure
}

if [ "$quick" -eq 1 ]; then
  echo "== full suite"
  configure_and_build build
  wait_for_torch
  ctest --test-dir build -j "$jobs" --output-on-failure
  exit 0
fi

# The end-to-end suite's build first (without the unit-test programs: the unit tests run once,
# under ASan/UBSan; without the benchmark programs, built last beside the suite, as no test runs
# them; line tables alone outside simgpu, the -O2 code of an install). The end-to-end jobs
# mostly wait (timeouts, hung ranks): about one core of two is busy.
# The three other builds (ASan/UBSan, ThreadSanitizer, real CUDA) use the idle one at the lowest
# priority, so the jobs' timing is left alone, and their tests run after the suite.
echo "== end-to-end suite, with the sanitizer and real-CUDA builds compiling beside it"
configure_and_build build -DHANGWATCH_UNIT_TESTS=OFF -DHANGWATCH_BENCHES_IN_ALL=OFF -DHANGWATCH_LINE_TABLES_ONLY=ON
side_log=$(mktemp)
(
  set -e
  renice -n 19 -p "$BASHPID" >/dev/null  # inherited by every compiler it starts
  ninja() { command ninja -j "$jobs" "$@"; }  # not ninja's nproc+2: the jobs keep their memory
  configure_and_build build-asan -DHANGWATCH_SANITIZE=address,undefined -- "${unit_targets[@]}"
  configure_and_build build-tsan -DHANGWATCH_SANITIZE=thread -- simcuda_tests simnccl_tests watchdog_tests
  tests/gpu/run.sh --cpu-only --only build --build-dir build-realcuda --out build-realcuda/gpu-suite-build
  ninja -C build benches  # the benchmark programs compile; no test runs them
) >"$side_log" 2>&1 &
side_builds=$!
trap 'rm -f "$torch_log" "$side_log"; kill "$side_builds" 2>/dev/null || true' EXIT
wait_for_torch
ctest --test-dir build -j "$jobs" --output-on-failure
if ! wait "$side_builds"; then
  cat "$side_log" >&2
  echo "test.sh: the sanitizer or real-CUDA builds failed (see above)" >&2
  exit 1
fi

echo "== unit tests under AddressSanitizer + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -LE e2e -j "$jobs" --output-on-failure

echo "== streams, events, ring collectives and the watchdog's poller under ThreadSanitizer"
tsan_tests

echo "== real-CUDA build and the GPU suite's CPU-only checks"
tests/gpu/run.sh --cpu-only --build-dir build-realcuda --simgpu-build build --out build-realcuda/gpu-suite
