#!/usr/bin/env bash
# The hangwatch demo on a fresh machine: install dependencies, build, hang a 4-rank
# training job on simgpu with a dead ring link, and show where every NCCL channel
# of two ranks stopped, which is what the forensics pipeline will read.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${HANGWATCH_BUILD_DIR:-$repo/build}"
nranks=4
faults='dead-link=1->2@op=10'
work="$(mktemp -d /tmp/hangwatch-demo.XXXXXX)"
log="$work/ring_train.log"
job_pid=""

say() { printf '\n== %s\n' "$*"; }

# Every rank of the job shares the session that setsid gave mpirun.
session_members() { ps -eo pid=,sid= | awk -v s="$1" '$2 == s { print $1 }'; }

stop_job() {
  [ -n "$job_pid" ] || return 0
  local pid
  for pid in $(session_members "$job_pid"); do
    [ "$pid" = "$job_pid" ] || kill -KILL "$pid" 2>/dev/null || true
  done
  sleep 1
  for pid in $(session_members "$job_pid"); do kill -KILL "$pid" 2>/dev/null || true; done
  wait "$job_pid" 2>/dev/null || true
  job_pid=""
}
trap 'stop_job; rm -rf "$work"' EXIT

say "dependencies"
"$repo/scripts/install-deps.sh"

say "build ($build)"
cmake -S "$repo" -B "$build" -G Ninja >/dev/null
ninja -C "$build"

say "4-rank ring_train on simgpu, SIMGPU_FAULTS='$faults'"
SIMGPU_FAULTS="$faults" setsid "$repo/examples/mpirun.sh" -np "$nranks" \
  "$build/examples/ring_train/ring_train" --steps 50 --grad-mb 1 --hidden 128 --layers 2 >"$log" 2>&1 &
job_pid=$!

# Progress has stopped when the count of finished steps holds still for 3 s.
last=-1
still=0
for _ in $(seq 1 120); do
  sleep 0.5
  kill -0 "$job_pid" 2>/dev/null || { cat "$log"; echo "demo: the job ended instead of hanging" >&2; exit 1; }
  now=$(grep -c ' done$' "$log" || true)
  if [ "$now" -gt 0 ] && [ "$now" -eq "$last" ]; then still=$((still + 1)); else still=0; fi
  last=$now
  [ "$still" -ge 6 ] && break
done
[ "$still" -ge 6 ] || { cat "$log"; echo "demo: the job neither hung nor finished in 60 s" >&2; exit 1; }
for r in $(seq 0 $((nranks - 1))); do
  grep "rank=$r step=" "$log" | tail -1
done
echo "no rank finished step 10: every rank is blocked in its 11th collective (op index 10)"

for r in 1 2; do
  pid=$(sed -n "s/^ring_train rank=$r pid=\([0-9]*\)$/\1/p" "$log")
  say "rank $r (pid $pid): where each ring channel waits (gdb)"
  gdb -p "$pid" -batch -nx -x "$repo/tests/e2e/gdb_threads.py" 2>/dev/null |
    sed -n '/HANGWATCH-E2E-THREADS-BEGIN/{n;p;}' |
    python3 -c '
import json, sys
direction = {0: "recv (tail from ring prev)", 1: "send (head from ring next)"}
rows = [t for t in json.load(sys.stdin) if t["ring"] and t["ring"]["function"] == "simnccl_wait_peer"]
if not rows:
    sys.exit("no channel thread is in simnccl_wait_peer (is ptrace allowed?)")
for t in sorted(rows, key=lambda t: t["ring"]["wait_channel"]):
    w = t["ring"]
    print("  %s: %s seq=%s channel=%s peer=%s %s target_step=%s observed_step=%s" % (
        t["name"], w["wait_op"], w["wait_seq"], w["wait_channel"], w["wait_peer"],
        direction.get(w["wait_direction"], w["wait_direction"]), w["wait_target_step"], w["wait_observed_step"]))
'
done

say "next"
cat <<'MSG'
This is the raw evidence a debugger reads from the hung ranks. The watchdog
(libhangwatch.so, issue #3) that detects the hang and triggers the dump, and
`forensics report` (issue #5) that turns every rank's evidence into a verdict
("link 1->2 delivers nothing"), are not built yet.
MSG

say "stopping the job"
stop_job
echo "demo: done"
