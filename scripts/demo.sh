#!/usr/bin/env bash
# The hangwatch demo on a fresh machine: install dependencies, build, hang a 4-rank
# training job on simgpu with a dead ring link under the watchdog, show what every
# rank dumped (trigger, snapshots, stacks, ring progress) and end with the report.
# It builds only what it runs (the preload, the forensics CLI, ring_train and simgpu); the test
# suite is scripts/test.sh's.
set -euo pipefail
started=$(date +%s)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Its own build folder, compiled for speed (HANGWATCH_FAST_BUILD: -O1 with line tables, simgpu
# with full debug info for the debugger phase); scripts/test.sh's build/ is left alone.
build="${HANGWATCH_BUILD_DIR:-$repo/build-demo}"
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
trap 'stop_job' EXIT

say "dependencies"
"$repo/scripts/install-deps.sh"

say "build ($build: the preload, the forensics CLI, ring_train and simgpu)"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANGWATCH_FAST_BUILD=ON -DHANGWATCH_UNITY_BUILD=ON >/dev/null
ninja -C "$build" hangwatch forensics ring_train

dumps="$work/dumps"
job_dir="$dumps/demo"
say "4-rank ring_train on simgpu, SIMGPU_FAULTS='$faults', watchdog preloaded (HANGWATCH_TIMEOUT=5)"
SIMGPU_FAULTS="$faults" LD_PRELOAD="$build/watchdog/libhangwatch.so" \
  HANGWATCH_DUMP_DIR="$dumps" HANGWATCH_JOB_ID=demo HANGWATCH_TIMEOUT=5 \
  HANGWATCH_FORENSICS="$build/forensics/forensics" \
  setsid "$repo/examples/mpirun.sh" -np "$nranks" \
  "$build/examples/ring_train/ring_train" --steps 50 --grad-mb 1 --hidden 128 --layers 2 >"$log" 2>&1 &
job_pid=$!

forensics_dumps() { find "$job_dir/ranks" -name 'r*.forensics.json' 2>/dev/null | wc -l; }
# The watchdog detects, every rank snapshots and runs its collector in parallel.
for _ in $(seq 1 240); do
  sleep 0.5
  kill -0 "$job_pid" 2>/dev/null || { cat "$log"; echo "demo: the job ended instead of hanging" >&2; exit 1; }
  [ "$(forensics_dumps)" -ge "$nranks" ] && break
done
[ "$(forensics_dumps)" -ge "$nranks" ] ||
  { cat "$log"; ls -R "$dumps" || true; echo "demo: not every rank dumped within 120 s" >&2; exit 1; }
for r in $(seq 0 $((nranks - 1))); do
  grep "rank=$r step=" "$log" | tail -1
done
grep '^hangwatch' "$log" | sort | uniq | head -20 || true

say "what the dumps say ($job_dir)"
python3 - "$job_dir" "$nranks" <<'PY'
import json, sys
from pathlib import Path
job, nranks = Path(sys.argv[1]), int(sys.argv[2])
t = json.loads((job / "TRIGGER.json").read_text())
op = t.get("stuck_op") or {}
print(f"TRIGGER.json: rank {t['rank']} on {t['host']} ({t['reason']}): {op.get('op')} seq={op.get('seq')} "
      f"comm={op.get('comm')} waiting {op.get('age_s', 0):.1f}s")
for r in range(nranks):
    snap = json.loads((job / "ranks" / f"r{r:05d}.watchdog.json").read_text())
    pending = [p for s in snap.get("streams", []) for p in s.get("pending", [])]
    first = pending[0] if pending else None
    comms = ", ".join(f"{c.get('hash')}: issued {c.get('last_issued_seq')} completed {c.get('last_completed_seq')}"
                      for c in snap.get("comms", []))
    print(f"rank {r}: oldest pending op " + (f"{first.get('op')} seq={first.get('seq')} age {first.get('age_s', 0):.1f}s"
          if first else "none") + f"; communicators {comms}")
    dump = json.loads((job / "ranks" / f"r{r:05d}.forensics.json").read_text())
    for th in dump["threads"]:
        names = [f["function"] for f in th["frames"]]
        inner = next((n for n in names if n.startswith(("simnccl_wait", "simnccl_device", "cudaStream", "nccl"))), None)
        if inner:
            print(f"    {th['name']:<14} {th['tid']}: {inner} <- ... <- {names[-1] if names else '?'} ({len(names)} frames)")
PY

say "where every ring channel stopped (ring_progress in the forensics dumps, read by gdb from the hung channel threads)"
python3 - "$job_dir" "$nranks" <<'PY'
import json, sys
from pathlib import Path
job, nranks = Path(sys.argv[1]), int(sys.argv[2])
for r in range(nranks):
    dump = json.loads((job / "ranks" / f"r{r:05d}.forensics.json").read_text())
    for rec in sorted(dump.get("ring_progress", []), key=lambda x: x["channel"]):
        sides = []
        for side, arrow in (("recv", "<-"), ("send", "->")):
            c = rec.get(side)
            if c:
                moved = c["observed_step"] - c.get("base_step", 0)
                sides.append(f"{side} {arrow} {c['peer']}: {moved} steps moved{' (waiting)' if c.get('waiting') else ''}")
        print(f"rank {r} {rec['op']} seq={rec['seq']} channel {rec['channel']}: " + "; ".join(sides))
PY

say "forensics report: the verdict for the operations team"
"$build/forensics/forensics" report "$job_dir"
echo
echo "demo: $(( $(date +%s) - started )) s from the start of this script to the verdict"
echo "(also saved as text, JSON and HTML: $job_dir/report/; every rank's dumps: $job_dir/ranks/)"

say "stopping the job"
stop_job
echo "demo: done"
