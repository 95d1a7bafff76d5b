#!/usr/bin/env bash
# hangwatch on a real GPU node, in one call: builds against the real CUDA, cuBLAS and
# NCCL (HANGWATCH_REAL_CUDA=ON) and runs each check below, printing one line per check:
#   PASS|FAIL|SKIP <check>: <what was seen>
# and writing logs, dumps and figures under --out.
#
#   tests/gpu/run.sh [--build-dir DIR] [--simgpu-build DIR] [--out DIR] [--only CHECK[,CHECK...]] [--cpu-only]
#                    [--list] [-h]
#
# Checks (in order):
#   build         configure and build the real-CUDA tree (ring_train, spin_on_flag, the watchdog, forensics)
#   dropin        no GPU needed: the real-CUDA ring_train on 4 ranks through simgpu's drop-in libraries
#                 (--simgpu-build, default build/: its simgpu-dropin folder and forensics) under the
#                 watchdog, healthy (no trigger, every collective timed) and with SIMGPU_FAULTS
#                 dead-link=1->2@op=6 (the report names the link)
#   gpu           a CUDA device is visible (nvidia-smi); without one every GPU check is SKIP
#   interpose     ring_train on one GPU under the watchdog: GEMM TFLOPS and AllReduce bus bandwidth
#                 in the metrics; HANGWATCH_DISABLE=1 is a pass-through with the same exit code
#   kernel-hang   a kernel spinning on a host-mapped flag is detected (TRIGGER.json, snapshot names it)
#   nccl-hang     4 ranks on one GPU (distinct NCCL_HOSTID, NCCL_NET=Socket over lo): one rank stops
#                 calling the collective; every rank dumps, cuda-gdb runs, the report names the rank;
#                 the seconds from trigger to report are printed
#   nccl-sigstop  the same 4 ranks, one frozen with SIGSTOP inside an AllReduce: the report names it
#   pytorch       with the pinned torch (scripts/install-deps.sh --torch, or HANGWATCH_TORCH_VENV): the
#                 DDP job examples/torch_ddp/train.py under torchrun on up to 4 GPUs, with and without
#                 the preload, same run (bench/torch_step_bench.py --gpu); the step-time ratio is printed
# --cpu-only runs what needs no GPU (the build, the drop-in check) and marks the rest SKIP.
# Exit status: 0 when no check failed, 1 otherwise, 2 on bad arguments.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="$repo/build-gpu"
simgpu_build="$repo/build"
simgpu_named=0
out=""
only=""
cpu_only=0
all_checks="build dropin gpu interpose kernel-hang nccl-hang nccl-sigstop pytorch"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || { echo "run.sh: --build-dir needs a directory" >&2; exit 2; }; build=$2; shift 2 ;;
    --simgpu-build) [ $# -ge 2 ] || { echo "run.sh: --simgpu-build needs a directory" >&2; exit 2; }
      simgpu_build=$2; simgpu_named=1; shift 2 ;;
    --out) [ $# -ge 2 ] || { echo "run.sh: --out needs a directory" >&2; exit 2; }; out=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || { echo "run.sh: --only needs check names" >&2; exit 2; }; only=${2//,/ }; shift 2 ;;
    --cpu-only) cpu_only=1; shift ;;
    --list) echo "$all_checks" | tr ' ' '\n'; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
for c in $only; do
  case " $all_checks " in *" $c "*) ;; *) echo "run.sh: unknown check '$c' (--list shows them)" >&2; exit 2 ;; esac
done
out=${out:-${OUT:-$(mktemp -d /tmp/hangwatch-gpu.XXXXXX)}}
mkdir -p "$out" || { echo "run.sh: cannot create $out" >&2; exit 2; }

failed=0
have_gpu=0
report() {  # status check detail
  printf '%s %s: %s\n' "$1" "$2" "$3" | tee -a "$out/summary.txt"
  [ "$1" = FAIL ] && failed=1
  return 0
}
wanted() { [ -z "$only" ] || case " $only " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
needs_gpu() {  # check: true when it may run
  if [ "$cpu_only" -eq 1 ]; then report SKIP "$1" "--cpu-only"; return 1; fi
  if [ "$have_gpu" -eq 0 ]; then report SKIP "$1" "no CUDA device visible"; return 1; fi
  return 0
}

lib="$build/watchdog/libhangwatch.so"
forensics="$build/forensics/forensics"
ring="$build/examples/ring_train/ring_train"
mpirun_sh="$repo/examples/mpirun.sh"

check_build() {
  local log="$out/build.log"
  # What compiles against the real CUDA; forensics does not, and is needed only to report.
  local targets=(ring_train trainshim spin_on_flag hangwatch)
  [ "$cpu_only" -eq 1 ] || targets+=(forensics)
  # In batches (HANGWATCH_UNITY_BUILD): a fresh build, as CI and a GPU session make it.
  if cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANGWATCH_REAL_CUDA=ON \
       -DHANGWATCH_UNITY_BUILD=ON >"$log" 2>&1 &&
     ninja -C "$build" "${targets[@]}" >>"$log" 2>&1; then
    report PASS build "real-CUDA tree in $build (${targets[*]})"
  else
    report FAIL build "see $log: $(grep -m1 -iE 'error' "$log")"
    return 1
  fi
}

# The real-CUDA ring_train (nvcc's kernels, the real sonames) on simgpu's drop-in libraries:
# what runs on a GPU node runs here, with the watchdog's interposers in the path at run time.
check_dropin() {
  local sim
  sim=$(cd "$simgpu_build" 2>/dev/null && pwd) || sim=$simgpu_build  # absolute: ranks and collectors use it
  local dropin="$sim/simgpu-dropin" sim_forensics="$sim/forensics/forensics"
  if [ ! -f "$dropin/libcudart.so.13" ] || [ ! -x "$sim_forensics" ]; then
    if [ "$simgpu_named" -eq 1 ]; then
      report FAIL dropin "no simgpu-dropin/ or forensics in $simgpu_build (build that tree first)"
    else
      report SKIP dropin "no simgpu build at $simgpu_build (--simgpu-build)"
    fi
    return 0
  fi
  local dumps="$out/dropin" rc hung_rc
  env -u SIMGPU_FAULTS LD_LIBRARY_PATH="$dropin" HANGWATCH_DUMP_DIR="$dumps" HANGWATCH_JOB_ID=healthy \
    HANGWATCH_TIMEOUT=20 HANGWATCH_METRICS_INTERVAL=1 LD_PRELOAD="$lib" \
    "$mpirun_sh" -np 4 "$ring" --steps 20 --log-every 10 --no-verify >"$out/dropin-healthy.log" 2>&1
  rc=$?
  SIMGPU_FAULTS="dead-link=1->2@op=6" LD_LIBRARY_PATH="$dropin" HANGWATCH_DUMP_DIR="$dumps" HANGWATCH_JOB_ID=hung \
    HANGWATCH_TIMEOUT=4 HANGWATCH_ON_HANG=abort HANGWATCH_FORENSICS="$sim_forensics" LD_PRELOAD="$lib" \
    timeout 240 "$mpirun_sh" -np 4 "$ring" --steps 50 --log-every 10 --no-verify >"$out/dropin-hung.log" 2>&1
  hung_rc=$?
  "$sim_forensics" report "$dumps/hung" --format json -o "$out/dropin-report.json" >/dev/null 2>"$out/dropin-report.err"
  local seen
  seen=$(python3 - "$dumps" "$out/dropin-report.json" <<'PY'
import glob, json, os, sys
dumps, report = sys.argv[1], sys.argv[2]
ops = sum(1 for p in glob.glob(dumps + "/healthy/metrics/*.jsonl") for line in open(p)
          for op in json.loads(line).get("ops", []) if op.get("c") == "coll")
triggered = os.path.exists(dumps + "/healthy/TRIGGER.json")
try:
    v = json.load(open(report))["verdict"]
    link = v.get("culprit_link") or {}
    named = f"{v['kind']} {link.get('from')}->{link.get('to')} confident={v.get('confident')}"
    ok = v["kind"] == "communication-hang" and (link.get("from"), link.get("to")) == (1, 2) and v.get("confident")
except (OSError, ValueError, KeyError):
    named, ok = "no report", False
print(f"{ops} {int(triggered)} {int(ok)} {named}")
PY
)
  set -- $seen
  local verified
  verified=$(grep -c 'OK steps=20 (results not verified)' "$out/dropin-healthy.log")
  if [ "$rc" -eq 0 ] && [ "$verified" -eq 4 ] && [ "${1:-0}" -gt 0 ] && [ "${2:-1}" -eq 0 ] && [ "${3:-0}" -eq 1 ]; then
    report PASS dropin "healthy: 4 ranks to the end, $1 collective metrics, no trigger; dead-link=1->2@op=6: ${*:4} (launcher exit $hung_rc)"
  else
    report FAIL dropin "healthy exit $rc ($verified/4 ranks finished, $1 collective metrics, trigger $2); hung: ${*:4}; see $out/dropin-*.log"
  fi
}

detect_gpu() {
  [ "$cpu_only" -eq 0 ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >"$out/gpus.txt" 2>&1 &&
    grep -q '^GPU' "$out/gpus.txt" && have_gpu=1
}

check_gpu() {
  if [ "$cpu_only" -eq 1 ]; then report SKIP gpu "--cpu-only"; return 0; fi
  if [ "$have_gpu" -eq 1 ]; then
    report PASS gpu "$(head -1 "$out/gpus.txt") ($(grep -c '^GPU' "$out/gpus.txt") visible); cuda-gdb: $(command -v cuda-gdb || echo none)"
  else
    report SKIP gpu "no CUDA device visible (nvidia-smi)"
  fi
}

# ring_train on one GPU with the watchdog, metrics every second.
check_interpose() {
  needs_gpu interpose || return 0
  local dumps="$out/interpose" rc plain_rc
  HANGWATCH_DUMP_DIR="$dumps" HANGWATCH_JOB_ID=watched HANGWATCH_METRICS_INTERVAL=1 HANGWATCH_COLLECT=0 \
    LD_PRELOAD="$lib" "$mpirun_sh" -np 1 "$ring" --steps 200 --log-every 100 >"$out/interpose.log" 2>&1
  rc=$?
  HANGWATCH_DISABLE=1 HANGWATCH_DUMP_DIR="$dumps" HANGWATCH_JOB_ID=disabled LD_PRELOAD="$lib" \
    "$mpirun_sh" -np 1 "$ring" --steps 20 >"$out/disabled.log" 2>&1
  plain_rc=$?
  local figures
  figures=$(python3 - "$dumps/watched/metrics" <<'PY'
import glob, json, sys
tflops, busbw = [], []
for path in glob.glob(sys.argv[1] + "/*.jsonl"):
    for line in open(path):
        w = json.loads(line)
        for op in w.get("ops", []):  # common/include/hangwatch/common/metrics_window.h
            if op.get("tf"): tflops.append(op["tf"])
            if op.get("c") == "coll" and op.get("bus"): busbw.append(op["bus"])
print(f"{max(tflops) if tflops else 0:.3g} {max(busbw) if busbw else 0:.3g}")
sys.exit(0 if tflops and busbw else 1)
PY
)
  local seen=$?
  if [ "$rc" -eq 0 ] && [ "$seen" -eq 0 ] && [ "$plain_rc" -eq 0 ] &&
     [ ! -d "$dumps/disabled/metrics" ]; then
    report PASS interpose "GEMM TFLOPS ${figures%% *}, AllReduce busbw ${figures##* } GB/s; HANGWATCH_DISABLE=1 exit $plain_rc, no metrics"
  else
    report FAIL interpose "exit $rc (disabled: $plain_rc), TFLOPS/busbw '$figures'; see $out/interpose.log"
  fi
}

check_kernel_hang() {
  needs_gpu kernel-hang || return 0
  local dumps="$out/kernel-hang"
  HANGWATCH_DUMP_DIR="$dumps" HANGWATCH_JOB_ID=spin HANGWATCH_TIMEOUT=3 HANGWATCH_COLLECT=0 \
    HANGWATCH_KERNEL_SAMPLE=1 LD_PRELOAD="$lib" "$build/tests/gpu/spin_on_flag" 8 >"$out/kernel-hang.log" 2>&1
  local rc=$?
  if [ -f "$dumps/spin/TRIGGER.json" ] && grep -q spinOnFlag "$dumps"/spin/ranks/*.watchdog.json 2>/dev/null &&
     [ "$rc" -eq 0 ]; then
    report PASS kernel-hang "detected after 3 s, snapshot names spinOnFlag, the kernel finished once released"
  else
    report FAIL kernel-hang "exit $rc, trigger: $(ls "$dumps/spin" 2>/dev/null | tr '\n' ' '); see $out/kernel-hang.log"
  fi
}

# 4 ranks on one GPU: NCCL refuses duplicate GPUs unless each rank is its own "host".
nccl_job() {  # name, extra ring_train args...; runs in the background, sets job_pid
  local name=$1; shift
  local wrapper="$out/$name-rank.sh"
  cat >"$wrapper" <<EOF
#!/usr/bin/env bash
export NCCL_HOSTID="hangwatch-gpu-\${OMPI_COMM_WORLD_RANK:-0}"
exec "\$@"
EOF
  chmod +x "$wrapper"
  NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
    HANGWATCH_DUMP_DIR="$out/dumps" HANGWATCH_JOB_ID="$name" HANGWATCH_TIMEOUT=20 \
    HANGWATCH_FORENSICS="$forensics" LD_PRELOAD="$lib" \
    setsid "$mpirun_sh" -np 4 -x NCCL_NET -x NCCL_SOCKET_IFNAME -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE \
    "$wrapper" "$ring" --steps 400 --log-every 10 "$@" >"$out/$name.log" 2>&1 &
  job_pid=$!
}

stop_job() {
  local pid
  for pid in $(ps -eo pid=,sid= | awk -v s="$1" '$2 == s { print $1 }'); do kill -KILL "$pid" 2>/dev/null; done
  wait "$1" 2>/dev/null
}

await_report() {  # name, expected verdict kind, expected culprit rank
  local name=$1 kind=$2 rank=$3 job_dir="$out/dumps/$1" t0 t_trigger
  t0=$(date +%s)
  while [ ! -f "$job_dir/TRIGGER.json" ] && [ $(( $(date +%s) - t0 )) -lt 180 ]; do sleep 1; done
  t_trigger=$(date +%s.%N)
  local done=0
  for _ in $(seq 1 240); do
    done=$(find "$job_dir/ranks" -name 'r*.forensics.json' 2>/dev/null | wc -l)
    [ "$done" -ge 4 ] && break
    sleep 0.5
  done
  "$forensics" report "$job_dir" --format json -o "$out/$name-report.json" >/dev/null 2>"$out/$name-report.err"
  local t_report secs verdict
  t_report=$(date +%s.%N)
  secs=$(python3 -c "print(f'{$t_report - $t_trigger:.1f}')")
  verdict=$(python3 - "$out/$name-report.json" "$job_dir" <<'PY'
import glob, json, sys
r = json.load(open(sys.argv[1]))
v = r["verdict"]
debugger = []
for path in glob.glob(sys.argv[2] + "/ranks/*.forensics.json"):
    d = json.load(open(path))
    for p in d.get("phases", []):
        if "debugger" in p.get("name", ""):
            debugger.append(p.get("seconds", 0))
print(v["kind"], ",".join(map(str, v["culprit_ranks"])),
      f"{max(debugger):.1f}" if debugger else "n/a", len(r.get("ranks_missing", [])))
PY
)
  set -- $verdict
  if [ "$1" = "$kind" ] && [ "$2" = "$rank" ]; then
    report PASS "$name" "$1 rank $2; trigger to report ${secs} s; cuda-gdb phase up to $3 s per rank; $done/4 dumps"
  else
    report FAIL "$name" "verdict '$verdict' (want $kind rank $rank); trigger to report ${secs} s; see $out/$name.log"
  fi
}

check_nccl_hang() {
  needs_gpu nccl-hang || return 0
  nccl_job nccl-hang --stall-rank 2 --stall-at-step 30 --stall-kind host-loop
  await_report nccl-hang non-communication-hang 2
  stop_job "$job_pid"
}

check_nccl_sigstop() {
  needs_gpu nccl-sigstop || return 0
  nccl_job nccl-sigstop --grad-mb 64
  sleep 20
  local victim
  victim=$(pgrep -f "ring_train --steps 400" | sort -n | sed -n 2p)  # the second rank's process
  [ -n "$victim" ] && kill -STOP "$victim"
  await_report nccl-sigstop communication-hang 1
  [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
  stop_job "$job_pid"
}

check_pytorch() {
  needs_gpu pytorch || return 0
  local venv=${HANGWATCH_TORCH_VENV:-${HANGWATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch}/torch-venv}
  if ! "$venv/bin/python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    report SKIP pytorch "no CUDA torch in $venv (scripts/install-deps.sh --torch)"
    return 0
  fi
  local gpus ratio
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  [ "$gpus" -gt 4 ] && gpus=4
  ratio=$(python3 "$repo/bench/torch_step_bench.py" --gpu --build "$build" --venv "$venv" --ranks "$gpus" \
    --steps 300 --warmup 50 --pairs 3 2>"$out/pytorch.log" | tail -1)
  if [ -n "$ratio" ]; then
    report PASS pytorch "$ratio"
  else
    report FAIL pytorch "see $out/pytorch.log"
  fi
}

echo "hangwatch GPU suite: build $build, results $out"
: >"$out/summary.txt"
detect_gpu
for check in $all_checks; do
  wanted "$check" || continue
  case "$check" in
    build) check_build || break ;;
    dropin) check_dropin ;;
    gpu) check_gpu ;;
    interpose) check_interpose ;;
    kernel-hang) check_kernel_hang ;;
    nccl-hang) check_nccl_hang ;;
    nccl-sigstop) check_nccl_sigstop ;;
    pytorch) check_pytorch ;;
  esac
done
exit "$failed"
