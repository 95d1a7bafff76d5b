#!/usr/bin/env python3
"""How soon the early warning names a stall, and what it costs a healthy job (issue #26).

1. Latency, on a dead network link (dead-link=R->R+1 at op 8, between two nodes of 4 ranks:
   SIMGPU_RANKS_PER_NODE=4) with HANGWATCH_WARN_AFTER=5 and a hard
   timeout far away: from the stall's start (the moment every rank reported the last step
   before the hung collective, as this script reads their output) to SUSPECT.json, and to the
   first `forensics report --wait 0` that names the injected link with stage "suspected".
   Median of --repeats runs at each rank count.
2. Cost per step: ring_train's step time with the early warning on (WARN_AFTER=15, its
   default) and off (0), runs alternated so that both see the same machine; the figure is the
   ratio of the medians, measured in this run.

    python3 bench/early_warning_bench.py --build build [--ranks 8,16] [--repeats 3] [--cost-runs 6]
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
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MPIRUN = REPO / "examples" / "mpirun.sh"
SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]


def kill_session(proc):
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) == proc.pid:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass
    proc.wait()


def start_job(build, nranks, dump_root, steps, faults="", **env_extra):
    env = dict(os.environ, LD_PRELOAD=str(build / "watchdog" / "libhangwatch.so"), HANGWATCH_DUMP_DIR=str(dump_root),
               HANGWATCH_JOB_ID="bench", HANGWATCH_COLLECT="0", SIMGPU_FAULTS=faults)
    env.update({k: str(v) for k, v in env_extra.items()})
    argv = [str(MPIRUN), "-np", str(nranks), str(build / "examples" / "ring_train" / "ring_train"), "--steps",
            str(steps), *SMALL_MODEL]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


class OutputFollower:
    """The job's output, read on a thread: each rank's last finished step and when it came."""

    def __init__(self, proc, nranks):
        self.done = {r: -1 for r in range(nranks)}
        self.text = []
        self.all_at = {}  # step -> monotonic time when every rank had reported it
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc):
        for line in proc.stdout:
            self.text.append(line)
            m = re.search(r"ring_train rank=(\d+) step=(\d+) done", line)
            if m:
                self.done[int(m[1])] = max(self.done[int(m[1])], int(m[2]))
                low = min(self.done.values())
                self.all_at.setdefault(low, time.monotonic())


def latency_once(build, nranks):
    with tempfile.TemporaryDirectory(prefix="hangwatch-warn-bench-") as root:
        culprit = nranks // 2 - 1
        # Nodes of 4 ranks (NCCL's network links between them report to the profiler); the dead
        # link crosses from one node to the next.
        job = start_job(build, nranks, root, 40, f"dead-link={culprit}->{culprit + 1}@op=8",
                        HANGWATCH_WARN_AFTER=5, HANGWATCH_TIMEOUT=600, SIMGPU_RANKS_PER_NODE=4)
        out = OutputFollower(job, nranks)
        suspect = Path(root) / "bench" / "SUSPECT.json"
        try:
            deadline, warned_at = time.monotonic() + 180, None
            while time.monotonic() < deadline:
                if warned_at is None and suspect.exists():
                    warned_at = time.monotonic()
                if warned_at is not None and 7 in out.all_at:
                    r = subprocess.run([str(build / "forensics" / "forensics"), "report", str(suspect.parent), "--wait",
                                        "0", "--no-save", "--format", "json"], capture_output=True, text=True)
                    rep = json.loads(r.stdout) if r.returncode == 0 else {}
                    if rep.get("stage") == "suspected" and rep["verdict"].get("culprit_link") == {
                            "from": culprit, "to": culprit + 1}:
                        stall = out.all_at[7]  # every rank finished step 7: op 8 is the next collective
                        return warned_at - stall, time.monotonic() - stall
                time.sleep(0.05)
            raise RuntimeError(f"no suspected verdict at {nranks} ranks:\n{''.join(out.text)[-2000:]}")
        finally:
            kill_session(job)


def step_ms(build, nranks, warn_after):
    with tempfile.TemporaryDirectory(prefix="hangwatch-warn-cost-") as root:
        job = start_job(build, nranks, root, 60, HANGWATCH_WARN_AFTER=warn_after)
        out, _ = job.communicate(timeout=300)
        m = re.search(r"step_ms=([0-9.]+)", out)
        if job.returncode != 0 or not m:
            raise RuntimeError(out[-2000:])
        return float(m[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, type=Path)
    ap.add_argument("--ranks", default="8,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cost-runs", type=int, default=6, help="runs with the warning on, and as many off")
    ap.add_argument("--cost-ranks", type=int, default=4)
    args = ap.parse_args()
    build = args.build.resolve()
    print("stall start -> SUSPECT.json, and -> a suspected verdict naming the link (HANGWATCH_WARN_AFTER=5):")
    for n in [int(x) for x in args.ranks.split(",")]:
        runs = [latency_once(build, n) for _ in range(args.repeats)]
        warn = statistics.median(w for w, _ in runs)
        verdict = statistics.median(v for _, v in runs)
        print(f"  {n:3d} ranks: SUSPECT.json {warn:.2f} s, verdict {verdict:.2f} s (median of {len(runs)}; "
              f"runs {', '.join(f'{w:.2f}/{v:.2f}' for w, v in runs)})")
    on, off = [], []
    for _ in range(args.cost_runs):
        off.append(step_ms(build, args.cost_ranks, 0))
        on.append(step_ms(build, args.cost_ranks, 15))
    ratio = statistics.median(on) / statistics.median(off)
    print(f"step time at {args.cost_ranks} ranks, early warning on / off: {statistics.median(on):.2f} / "
          f"{statistics.median(off):.2f} ms = {ratio:.3f} (on {on}, off {off})")


if __name__ == "__main__":
    sys.exit(main())
