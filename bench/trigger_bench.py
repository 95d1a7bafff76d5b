#!/usr/bin/env python3
"""What the trigger costs shared storage, and how fast it reaches every rank (issue #18).

1. Metadata operations on the dump directory per node and second on a healthy job: the job
   runs under `strace -f --seccomp-bpf -e trace=%file` (an independent count: every open, stat,
   rename, mkdir ... whose path lies in the dump directory), split into trigger look-ups
   (TRIGGER.json, TRIGGER.beacon) and everything else (metrics and timeline windows). All ranks
   run on this one machine, so the count is per node.
2. Time from the first detection (TRIGGER.json's time) to the last rank's snapshot
   (ranks/rNNNNN.watchdog.json's time_unix_s), collector off: on a dead-link job, where every
   rank also times out by itself, and after `forensics trigger` on a healthy job, where every
   rank learns of the hang only through the trigger.

Each figure for the library under test and, with --base-lib, for another build of it (e.g. the
commit before the per-node trigger):

    python3 bench/trigger_bench.py --build build [--base-lib /tmp/base/build/watchdog/libhangwatch.so]
"""
import argparse
import json
import os
import re
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


def session_pids(sid):
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) == sid:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    return pids


def kill_session(proc):
    for pid in session_pids(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def job_env(lib, dump_root, **extra):
    env = dict(os.environ, LD_PRELOAD=str(lib), HANGWATCH_DUMP_DIR=str(dump_root), HANGWATCH_JOB_ID="bench")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def count_lookups(build, lib, ranks, seconds):
    """Runs a healthy job for `seconds` under strace; returns (trigger ops/s, other ops/s, window s)."""
    with tempfile.TemporaryDirectory(prefix="trigger-bench-") as tmp:
        dump = Path(tmp) / "dumps"
        log = Path(tmp) / "strace.log"
        argv = ["strace", "-f", "--seccomp-bpf", "-ttt", "-e", "trace=%file", "-o", str(log),
                str(MPIRUN), "-np", str(ranks), str(build / "examples/ring_train/ring_train"),
                "--steps", "1000000", "--log-every", "100000", *SMALL_MODEL]
        env = job_env(lib, dump, HANGWATCH_TIMEOUT=60, HANGWATCH_COLLECT=0)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(seconds)
        kill_session(proc)
        times_trigger, times_other = [], []
        prefix = str(dump)
        for line in log.read_text(errors="replace").splitlines():
            m = re.match(r"\d+\s+(\d+\.\d+)\s+(\w+)\((.*)", line)
            if not m or prefix not in m[3]:
                continue
            t = float(m[1])
            (times_trigger if "TRIGGER" in m[3] else times_other).append(t)
        every = sorted(times_trigger + times_other)
        if not every:
            return 0.0, 0.0, 0.0
        # Skip start-up (communicators, first windows); count over what is left.
        start, end = every[0] + 3.0, every[-1]
        window = max(end - start, 1e-9)
        rate = lambda ts: sum(1 for t in ts if start <= t <= end) / window
        return rate(times_trigger), rate(times_other), window


def detection_to_last_snapshot(build, lib, ranks, timeout_s, manual):
    """Seconds from TRIGGER.json's time to the latest snapshot time: of a dead-link job, or of a
    healthy one triggered by hand (`manual`)."""
    with tempfile.TemporaryDirectory(prefix="trigger-bench-") as tmp:
        dump = Path(tmp) / "dumps"
        job = dump / "bench"
        env = job_env(lib, dump, HANGWATCH_TIMEOUT=timeout_s, HANGWATCH_COLLECT=0,
                      SIMGPU_FAULTS="" if manual else "dead-link=1->2@op=6")
        argv = [str(MPIRUN), "-np", str(ranks), str(build / "examples/ring_train/ring_train"),
                "--steps", "1000000" if manual else "50", "--log-every", "1", *SMALL_MODEL]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        try:
            if manual:
                # Every rank has run steps (and started its watchdog) before the trigger.
                seen = set()
                for line in proc.stdout:
                    m = re.match(r"ring_train rank=(\d+) step=(\d+) done", line)
                    if m and int(m[2]) >= 3:
                        seen.add(int(m[1]))
                    if len(seen) == ranks:
                        break
                subprocess.run([str(build / "forensics/forensics"), "trigger", str(job)], check=True,
                               stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + 120 + 4 * ranks
            snaps = []
            while time.monotonic() < deadline:
                snaps = list((job / "ranks").glob("r*.watchdog.json")) if (job / "ranks").exists() else []
                if len(snaps) >= ranks:
                    break
                time.sleep(0.2)
            if len(snaps) < ranks:
                raise RuntimeError(f"only {len(snaps)} of {ranks} ranks dumped")
            time.sleep(0.5)
            trigger = json.loads((job / "TRIGGER.json").read_text())
            times = [json.loads(p.read_text())["time_unix_s"] for p in snaps]
            return max(times) - trigger["time_unix_s"]
        finally:
            kill_session(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--base-lib", help="another libhangwatch.so to compare with")
    ap.add_argument("--ranks", type=int, default=8, help="ranks of the healthy job (one node)")
    ap.add_argument("--seconds", type=float, default=70)
    ap.add_argument("--skip-lookups", action="store_true")
    ap.add_argument("--detect-ranks", default="8,32")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    build = Path(args.build).resolve()
    libs = [("this build", build / "watchdog" / "libhangwatch.so")]
    if args.base_lib:
        libs.insert(0, ("base", Path(args.base_lib).resolve()))

    if not args.skip_lookups:
        print(f"== metadata ops on the dump directory, healthy {args.ranks}-rank job on one node, "
              f"{args.seconds:.0f} s (strace)")
    for name, lib in [] if args.skip_lookups else libs:
        trig, other, window = count_lookups(build, lib, args.ranks, args.seconds)
        print(f"  {name:10s}  trigger look-ups {trig:6.2f}/s   other (metrics, timeline) {other:6.2f}/s   "
              f"total {trig + other:6.2f}/s   over {window:.1f} s")

    for manual in (False, True):
        print("== first detection -> last rank's snapshot, collector off, " +
              ("forensics trigger on a healthy job" if manual else "dead link (every rank times out too)"))
        for n in [int(x) for x in args.detect_ranks.split(",")]:
            for name, lib in libs:
                samples = []
                for _ in range(args.repeat):
                    samples.append(detection_to_last_snapshot(build, lib, n, 60 if manual else 5 if n <= 8 else 10,
                                                              manual))
                print(f"  {n:3d} ranks  {name:10s}  median {statistics.median(samples):5.2f} s   "
                      f"max {max(samples):5.2f} s   ({', '.join(f'{s:.2f}' for s in samples)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
