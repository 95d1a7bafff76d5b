#!/usr/bin/env python3
"""Issue #18's acceptance run, by hand (CI runs each scenario once through test_report.py and
test_launchers.py): every scenario in HANGWATCH_ON_HANG=abort mode under its launcher, with
`forensics report` (default --wait) run the moment the launcher returns, N times in a row,
optionally with busy loops competing for the CPUs. Prints one line per run and a summary;
exits non-zero when any verdict was wrong.

    RING_TRAIN=build/examples/ring_train/ring_train python3 tests/e2e/abort_acceptance.py --runs 5 --busy 2

--jitter S runs the debugger through tests/programs/jittery_debugger.py (up to S seconds late),
so collectors end far apart, as cuda-gdb attaches do on GPU nodes. HANGWATCH_LIB and FORENSICS
point the runs at another build, e.g. the one before the completion protocol.
"""
import argparse
import json
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report_jobs  # noqa: E402


def damage(job_dir):
    """One rank's dumps deleted, two truncated (a snapshot and a forensics dump)."""
    ranks = Path(job_dir) / "ranks"
    for f in ranks.glob("r00003.*"):
        f.unlink()
    for name in ("r00001.watchdog.json", "r00007.forensics.json"):
        if (ranks / name).exists():  # an older build may not have written it at all
            text = (ranks / name).read_text()
            (ranks / name).write_text(text[:len(text) // 3])


# name -> (scenario, launcher, expected kind, culprit ranks, culprit link, damage after the run)
CASES = {
    "dead link, 8 ranks (mpirun)": ("dead-link-8", "mpirun", "communication-hang", [5, 6], {"from": 5, "to": 6}, None),
    "dead rank, 6 ranks (torchrun-like)": ("dead-rank-6", "torchrun", "communication-hang", [3], None, None),
    "rank in host code, 6 ranks (srun-like)": ("host-loop-6", "srun", "non-communication-hang", [4], None, None),
    "collective mismatch, 8 ranks (mpirun)": ("mismatch-8", "mpirun", "collective-mismatch", [6], None, None),
    "dead link, 1 deleted + 2 truncated (mpirun)": ("dead-link-8", "mpirun", "communication-hang", [5, 6],
                                                    {"from": 5, "to": 6}, damage),
}


def busy_loop():
    while True:
        pass


def run_case(name, root, extra_env):
    scenario, launcher, kind, culprits, link, after = CASES[name]
    start = time.monotonic()
    job_dir, out, code = report_jobs.run_hung_job(scenario, root, launcher=launcher, extra_env=extra_env)
    returned = time.monotonic()
    if after:
        after(job_dir)
    rc, stdout, stderr = report_jobs.report(job_dir, "json")
    reported = time.monotonic()
    if rc != 0:
        return False, f"report exited {rc}: {stderr[-300:]}", returned - start, reported - returned, None
    rep = json.loads(stdout)
    v = rep["verdict"]
    trigger_t = rep["trigger"]["time_unix_s"] if rep.get("trigger") else None
    done = []
    for p in (Path(job_dir) / "ranks").glob("r*.state.json"):
        try:
            done.append(json.loads(p.read_text())["time_unix_s"])
        except (OSError, ValueError):
            pass
    last_done = max(done) - trigger_t if done and trigger_t else None
    # .get: so that older builds (HANGWATCH_LIB, FORENSICS) can be measured the same way.
    ok = (code not in (None, 0) and v["kind"] == kind and v["culprit_ranks"] == culprits and v["culprit_link"] == link
          and v.get("confident", True) and rep.get("ranks_collecting", []) == [])
    why = (f"launcher={code} kind={v['kind']} culprits={v['culprit_ranks']} link={v['culprit_link']} "
           f"confident={v.get('confident')} collecting={rep.get('ranks_collecting')} missing={rep['ranks_missing']}")
    return ok, why, returned - start, reported - returned, last_done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--busy", type=int, default=0, help="busy loops running beside the jobs")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    ap.add_argument("--jitter", type=float, default=0, help="delay each debugger by up to S seconds")
    args = ap.parse_args()
    extra_env = {}
    if args.jitter > 0:
        extra_env = {"HANGWATCH_DEBUGGER": str(Path(__file__).resolve().parents[1] / "programs" / "jittery_debugger.py"),
                     "JITTERY_DEBUGGER_MAX_S": str(args.jitter)}
    loops = [multiprocessing.Process(target=busy_loop, daemon=True) for _ in range(args.busy)]
    for p in loops:
        p.start()
    failures = 0
    summary = {}
    try:
        for name in CASES:
            if args.only and args.only not in name:
                continue
            for run in range(1, args.runs + 1):
                root = tempfile.mkdtemp(prefix="hangwatch-acceptance-")
                try:
                    ok, why, job_s, report_s, done_s = run_case(name, root, extra_env)
                finally:
                    shutil.rmtree(root, True)
                failures += not ok
                summary.setdefault(name, []).append(ok)
                done = f"{done_s:5.1f}" if done_s is not None else "  ?  "
                print(f"{'ok  ' if ok else 'FAIL'} {name:45s} run {run}: launcher returned after {job_s:5.1f} s, "
                      f"trigger->last rank done {done} s, report {report_s:4.1f} s  [{why}]", flush=True)
    finally:
        for p in loops:
            p.terminate()
    print(f"\n== {args.runs} runs each, {args.busy} busy loop(s) beside them, debugger jitter {args.jitter:g} s")
    for name, oks in summary.items():
        print(f"  {sum(oks)}/{len(oks)} right  {name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
