#!/usr/bin/env bash
# Per-launch cost of two builds of libhangwatch.so against each other in the same run
# (interleaved, median of 3 rounds x 5 repetitions), with no preload as the floor:
#   bench/preload_ab.sh OLD_LIB NEW_LIB [BUILD_DIR]
# e.g. a libhangwatch.so built from an older commit against this tree's.
set -euo pipefail
case "${1:-}" in -h|--help|"") sed -n '2,5p' "$0"; exit 0 ;; esac
old=$1 new=$2
here=$(cd "$(dirname "$0")" && pwd)
build=${3:-$here/../build}
bench=$build/bench/watchdog_launch_bench
for f in "$old" "$new" "$bench"; do [ -e "$f" ] || { echo "preload_ab.sh: no $f" >&2; exit 2; }; done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export HANGWATCH_DUMP_DIR=$scratch/dumps HANGWATCH_JOB_ID=bench HANGWATCH_COLLECT=0
for round in 1 2 3; do
  for which in old new plain; do
    case $which in old) lib=$old ;; new) lib=$new ;; plain) lib= ;; esac
    LD_PRELOAD=$lib "$bench" --benchmark_filter='BM_LaunchKernel$|BM_NvccLaunchRejected' \
      --benchmark_repetitions=5 --benchmark_min_time=0.3 \
      --benchmark_out="$scratch/${which}_$round.json" --benchmark_out_format=json >/dev/null 2>&1
  done
done
python3 - "$scratch" <<'PY'
import json, statistics, sys
d = sys.argv[1]
for name in ["BM_LaunchKernel", "BM_NvccLaunchRejected"]:
    r = {w: statistics.median(b["real_time"] for i in (1, 2, 3)
                              for b in json.load(open(f"{d}/{w}_{i}.json"))["benchmarks"]
                              if b["run_name"] == name and b.get("aggregate_name") == "median")
         for w in ("old", "new", "plain")}
    print(f"{name}: no preload {r['plain']:.1f} ns, old {r['old']:.1f} ns, new {r['new']:.1f} ns, "
          f"new/old {r['new'] / r['old']:.3f}")
PY
