#!/usr/bin/env bash
# What libhangwatch.so costs the job, measured against itself in the same run:
#  1. per-launch cost of cudaLaunchKernel over simgpu, plain vs LD_PRELOAD (untimed
#     launches: HANGWATCH_KERNEL_SAMPLE=0; and with the default 1-in-64 sampling);
#  2. ring_train step time, 4 ranks, interleaved runs without and with the library.
#   bench/watchdog_bench.sh [BUILD_DIR] [PAIRS]
# RING_ARGS adds ring_train options to part 2, e.g. RING_ARGS="--cuda-graph" (graph replays)
# or RING_ARGS="--nonblocking".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
pairs=${2:-5}
bench=$build/bench/watchdog_launch_bench
lib=$build/watchdog/libhangwatch.so
ring=$build/examples/ring_train/ring_train
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export HANGWATCH_DUMP_DIR=$scratch/dumps HANGWATCH_JOB_ID=bench HANGWATCH_COLLECT=0

median_ns() {  # benchmark json, benchmark name -> median cpu... real time in ns
  python3 - "$1" "$2" <<'PY'
import json, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"]
        if b["run_name"] == sys.argv[2] and b.get("aggregate_name") == "median"]
print(runs[0]["real_time"])
PY
}

run_bench() {  # name, env...
  local out=$scratch/$1.json; shift
  env "$@" "$bench" --benchmark_repetitions=7 --benchmark_min_time=0.3 \
    --benchmark_out="$out" --benchmark_out_format=json >/dev/null 2>&1
  echo "$out"
}

echo "== per-launch cost over simgpu (median of 7 repetitions, ns per call)"
plain=$(run_bench plain HANGWATCH_DISABLE=)
untimed=$(run_bench untimed LD_PRELOAD="$lib" HANGWATCH_KERNEL_SAMPLE=0)
sampled=$(run_bench sampled LD_PRELOAD="$lib")
for name in BM_LaunchKernelRejected BM_NvccLaunchRejected BM_DriverEntryPointLaunchRejected BM_LaunchKernel; do
  p=$(median_ns "$plain" $name); u=$(median_ns "$untimed" $name); s=$(median_ns "$sampled" $name)
  python3 -c "
p, u, s = $p, $u, $s
print(f'$name: plain {p:.1f} ns | untimed {u:.1f} ns (+{u-p:.1f} ns, x{u/p:.3f}) | 1-in-64 sampled {s:.1f} ns (+{s-p:.1f} ns, x{s/p:.3f})')"
done

echo "== ring_train step time, 4 ranks, 60 steps${RING_ARGS:+, $RING_ARGS}, $pairs interleaved pairs"
step_ms() {
  "$here/../examples/mpirun.sh" -np 4 "$@" "$ring" --steps 60 --log-every 60 ${RING_ARGS:-} 2>&1 |
    sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p'
}
without=(); with=()
for i in $(seq "$pairs"); do
  without+=("$(step_ms)")
  with+=("$(step_ms -x LD_PRELOAD="$lib" -x HANGWATCH_DUMP_DIR -x HANGWATCH_JOB_ID -x HANGWATCH_COLLECT)")
done
python3 -c "
import statistics as st
a = [float(x) for x in '${without[*]}'.split()]
b = [float(x) for x in '${with[*]}'.split()]
print('without:', a)
print('with:   ', b)
ma, mb = st.median(a), st.median(b)
print(f'median step_ms without {ma:.2f}, with {mb:.2f}: ratio {mb/ma:.4f} ({(mb/ma-1)*100:+.2f} %)')"
