#!/usr/bin/env python3
"""How soon `forensics report` names the culprit (issue 12): a simgpu job with a dead network
link hangs under libhangwatch.so with the collector on (HANGWATCH_COLLECT=1, abort mode); this
script watches the job directory and runs the report twice:

  first verdict  as soon as the last rank's snapshot landed, with `--wait 0`: the snapshots
                 alone (NCCL's profiler progress), while the collectors still run;
  full report    once every rank's dumps are done (the debugger's ring records too).

It prints, per job size, the times from the first detection (TRIGGER.json) to each, from the
last snapshot to the first verdict (the aim: 1 s or less), and the culprit each named. The full
report is the baseline measured in the same run; the ratio first/full is what the profiler
path saves.

    python3 bench/verdict_latency.py --build build [--ranks 8,32] [--repeat 3]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MPIRUN = REPO / "examples" / "mpirun.sh"
SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]


def report(forensics, job_dir, wait):
    start = time.time()
    r = subprocess.run([forensics, "report", str(job_dir), "--format", "json", "--wait", str(wait)],
                       capture_output=True, text=True, timeout=600)
    end = time.time()
    if r.returncode != 0:
        raise RuntimeError(f"forensics report exited {r.returncode}: {r.stderr[-2000:]}")
    v = json.loads(r.stdout)["verdict"]
    return end, end - start, v


def culprit(v):
    if v.get("culprit_link"):
        return f"link {v['culprit_link']['from']}->{v['culprit_link']['to']} ({v.get('source')})"
    if v.get("culprit_ranks"):
        return f"rank(s) {v['culprit_ranks']} ({v.get('source')})"
    return f"{v['kind']}, suspects {[s['text'] for s in v.get('suspects', [])]}"


def one_run(build, nranks, fault, timeout_s):
    root = Path(tempfile.mkdtemp(prefix="hangwatch-verdict-bench-"))
    job_dir = root / "bench"
    ranks_dir = job_dir / "ranks"
    forensics = str(build / "forensics" / "forensics")
    env = dict(os.environ, LD_PRELOAD=str(build / "watchdog" / "libhangwatch.so"), HANGWATCH_DUMP_DIR=str(root),
               HANGWATCH_JOB_ID="bench", HANGWATCH_TIMEOUT=str(timeout_s), HANGWATCH_COLLECT="1",
               HANGWATCH_ON_HANG="abort", HANGWATCH_FORENSICS=forensics, SIMGPU_FAULTS=fault,
               SIMGPU_RANKS_PER_NODE="1")
    argv = [str(MPIRUN), "-np", str(nranks), str(build / "examples" / "ring_train" / "ring_train"), "--steps", "200",
            *SMALL_MODEL]
    job = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    out = {}
    try:
        deadline = time.time() + 600
        snaps = []
        while time.time() < deadline:
            snaps = list(ranks_dir.glob("r*.watchdog.json")) if ranks_dir.exists() else []
            if len(snaps) == nranks:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError(f"only {len(snaps)} of {nranks} snapshots after 600 s")
        last_snapshot = max(p.stat().st_mtime for p in snaps)
        trigger = json.loads((job_dir / "TRIGGER.json").read_text())["time_unix_s"]
        first_at, first_took, first = report(forensics, job_dir, 0)
        done = lambda: all(json.loads(p.read_text()).get("state") == "done"
                           for p in ranks_dir.glob("r*.state.json")) and len(list(ranks_dir.glob("r*.state.json"))) == nranks
        while time.time() < deadline and not done():
            time.sleep(0.1)
        full_at, full_took, full = report(forensics, job_dir, 0)
        out = {"trigger_to_first": first_at - trigger, "snapshot_to_first": first_at - last_snapshot,
               "first_report_s": first_took, "trigger_to_full": full_at - trigger, "full_report_s": full_took,
               "first": culprit(first), "full": culprit(full)}
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
        shutil.rmtree(root, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory (default: build)")
    ap.add_argument("--ranks", default="8,32", help="job sizes, comma-separated (default: 8,32)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size (default: 3)")
    ap.add_argument("--timeout", type=float, default=3, help="HANGWATCH_TIMEOUT (default: 3)")
    args = ap.parse_args()
    build = Path(args.build).resolve()
    for binary in (build / "forensics" / "forensics", build / "watchdog" / "libhangwatch.so"):
        if not binary.exists():
            sys.exit(f"{binary} is not built")
    for n in (int(x) for x in args.ranks.split(",")):
        fault = f"dead-link={n // 2 + 1}->{n // 2 + 2}@op=8"
        runs = [one_run(build, n, fault, args.timeout) for _ in range(args.repeat)]
        med = lambda k: statistics.median(r[k] for r in runs)
        print(f"{n} ranks, {fault}, median of {len(runs)}:")
        print(f"  trigger -> first verdict (snapshots only): {med('trigger_to_first'):.2f} s"
              f"  (last snapshot -> first verdict {med('snapshot_to_first'):.2f} s, report itself {med('first_report_s'):.2f} s)")
        print(f"  trigger -> full report (debugger records too): {med('trigger_to_full'):.2f} s"
              f"  (report itself {med('full_report_s'):.2f} s)")
        print(f"  ratio first/full: {med('trigger_to_first') / med('trigger_to_full'):.3f}")
        for i, r in enumerate(runs):
            print(f"  run {i}: first names {r['first']}; full names {r['full']}")


if __name__ == "__main__":
    main()
