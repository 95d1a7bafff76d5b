#!/usr/bin/env python3
"""hangwatch beside PyTorch's Flight Recorder on the same hung job (issue 42).

Each run is one unmodified PyTorch DDP job (examples/torch_ddp/train.py, 4 ranks) under the real
torchrun on simgpu, with hangwatch preloaded and the Flight Recorder on, one fault drawn from its
class (which rank, which op or step). PyTorch's timeout and HANGWATCH_TIMEOUT are both 5 s by
default, so both tools see the hang at the same moment; PyTorch then ends the job with SIGABRT
(4 s after its timeout here, --abort-wait-ms; 15 s by PyTorch's default), which hangwatch holds
until its dumps are done, and each rank says for how long (reported as median and max). With
--hangwatch-timeout far above --pytorch-timeout, PyTorch's watchdog declares every hang (the
abort race of issue 42). Afterwards:

  - Flight Recorder: its own analyzer, `python -m torch.distributed.flight_recorder.fr_trace`
    (with --allow-incomplete-ranks, or it refuses a job with a missing dump), on its dumps;
  - hangwatch: `forensics report --format json` on its dumps.

A job the launcher ended instead of hanging (torchrun tears the group down when a worker dies)
counts as "no hang" for both. Both are judged with the accuracy campaign's rules (tests/e2e/verdict_matrix.py judge): right
(confident and correct), hedged (the culprit among several named), wrong (another culprit, or
none: fr_trace printing no error is a miss). fr_trace names ranks, never links: naming an end of
a dead link is a hedge. Timed: seconds from the stall (the stuck operation's start, from
TRIGGER.json) to each one's answer (its dumps written, plus its analysis).

    python3 bench/vs_flight_recorder.py --build build --runs 2 --json out.json
    python3 bench/vs_flight_recorder.py --list
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

NRANKS = 4
TIMEOUT_S = 5         # both tools' timeout, unless --pytorch-timeout / --hangwatch-timeout say otherwise
ABORT_WAIT_MS = 4000  # PyTorch's wait from its timeout to its SIGABRT (15000 by default)
TRAIN = REPO / "examples" / "torch_ddp" / "train.py"


def dead_link(rng):
    a = rng.randrange(NRANKS)
    b = (a + 1) % NRANKS
    return {"faults": f"dead-link={a}->{b}@op={rng.randint(12, 30)}", "env": {"NCCL_ALGO": "Ring"},
            "truth": {"kind": "communication-hang", "link": (a, b)}}


def gpu_stops(rng):
    r = rng.randrange(NRANKS)
    return {"faults": f"dead-rank={r}@op={rng.randint(12, 30)}", "truth": {"kind": "communication-hang", "rank": r}}


def host_stuck(rng):
    r = rng.randrange(NRANKS)
    return {"args": ["--stall-rank", str(r), "--stall-at-step", str(rng.randint(3, 6))],
            "truth": {"kind": "non-communication-hang", "rank": r}}


def rank_exits(rng):
    r = rng.randrange(NRANKS)
    return {"args": ["--exit-rank", str(r), "--exit-at-step", str(rng.randint(3, 6)), "--exit-how", "kill"],
            "truth": {"kind": "communication-hang", "rank": r}}


def mismatch(kind):
    def make(rng):
        r = rng.randrange(NRANKS)
        return {"args": ["--mismatch-rank", str(r), "--mismatch-at-step", str(rng.randint(3, 6)), "--mismatch-kind",
                         kind], "truth": {"kind": "collective-mismatch", "rank": r}}
    return make


def never_joins(rng):
    r = rng.randrange(NRANKS)
    return {"args": ["--never-join-rank", str(r)], "truth": {"kind": "non-communication-hang", "rank": r}}


CLASSES = {
    "dead-link": (dead_link, "a ring link stops delivering inside DDP's all-reduce"),
    "gpu-stops": (gpu_stops, "a rank's GPU stops inside a collective"),
    "host-stuck": (host_stuck, "a rank's Python loops outside any collective"),
    "rank-exits": (rank_exits, "a rank's process is killed mid-step"),
    "extra-collective": (mismatch("extra"), "a rank calls one all-reduce more"),
    "size-mismatch": (mismatch("size"), "a rank calls an all-reduce of another size"),
    "never-joins": (never_joins, "a rank loops in Python before it joins the process group"),
}


def fr_trace_judge(output, truth):
    """fr_trace's text: "Culprit rank R" where states, types or sizes differ; "missed FR dumps
    from ranks ({R, ...})" where it cannot decide (a hedge among those ranks); nothing otherwise."""
    named = sorted({int(r) for r in re.findall(r"[Cc]ulprit rank[s]?:? *(\d+)", output)})
    missed = sorted({int(r) for group in re.findall(r"missed FR dumps from ranks \(\{([\d, ]+)\}\)", output)
                     for r in group.split(",")})
    wanted = set(truth["link"]) if "link" in truth else {truth["rank"]}
    if not named and not missed:
        return "wrong", "names no culprit (a miss)"
    if not named:
        return ("hedged", f"cannot decide: missed FR dumps from rank(s) {missed}") if wanted & set(missed) \
            else ("wrong", f"cannot decide: missed FR dumps from rank(s) {missed}")
    if len(named) == 1 and named[0] in wanted and "link" not in truth:
        return "right", f"names rank {named[0]}"
    if wanted & set(named):
        return "hedged", f"names rank(s) {named}" + (" (an end of the dead link)" if "link" in truth else "")
    return "wrong", f"names rank(s) {named}"


def all_dumped(job_dir):
    states = list((job_dir / "ranks").glob("r*.state.json")) if (job_dir / "TRIGGER.json").exists() else []
    try:
        return len(states) == NRANKS and all(json.loads(f.read_text()).get("state") == "done" for f in states)
    except (OSError, ValueError):
        return False


def first_line(text, pattern):
    m = re.search(pattern, text)
    return m.group(0) if m else ""


def run(case, build, venv, keep, timeouts=(TIMEOUT_S, TIMEOUT_S), abort_wait_ms=ABORT_WAIT_MS):
    from harness import MpiJob
    from verdict_matrix import judge as hangwatch_judge

    root = Path(tempfile.mkdtemp(prefix="hangwatch-vsfr-"))
    dumps, fr_dir = root / "dumps", root / "fr"
    fr_dir.mkdir()
    env = {"LD_PRELOAD": str(build / "watchdog" / "libhangwatch.so"), "HANGWATCH_DUMP_DIR": str(dumps),
           "HANGWATCH_JOB_ID": "vsfr", "HANGWATCH_TIMEOUT": str(timeouts[1]),
           "HANGWATCH_FORENSICS": str(build / "forensics" / "forensics"), "SIMGPU_FAULTS": case.get("faults", ""),
           "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "TORCH_FR_BUFFER_SIZE": "2000",
           "TORCH_FR_DUMP_TEMP_FILE": str(fr_dir / "rank_"), "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": str(abort_wait_ms),
           **case.get("env", {})}
    launcher = [str(build / "simgpu-dropin" / "simgpu-run"), str(venv / "bin" / "torchrun"), "--standalone",
                "--nproc-per-node", str(NRANKS)]
    argv = [str(TRAIN), "--steps", "100", "--pg-timeout", str(timeouts[0]), *case.get("args", [])]
    try:
        job_dir = dumps / "vsfr"
        with MpiJob(NRANKS, argv, env=env, program="train.py", launcher=launcher) as job:
            # PyTorch's watchdog ends a hung job (its timeout, then SIGABRT 15 s later), except
            # where it watches nothing: a process group that never forms hangs in init for ever.
            # Once hangwatch's dumps are done, the job gets PyTorch's 20 s more, then is stopped.
            deadline = time.monotonic() + 180 + max(timeouts)
            dumped_at = None
            while job.wait_exit(1) is None and time.monotonic() < deadline:
                if dumped_at is None and all_dumped(job_dir):
                    dumped_at = time.monotonic()
                if dumped_at is not None and time.monotonic() - dumped_at > timeouts[0] + abort_wait_ms / 1000 + 5:
                    break
            output = job.output()
        trigger = json.loads((job_dir / "TRIGGER.json").read_text()) if (job_dir / "TRIGGER.json").exists() else None
        stall = trigger["time_unix_s"] - trigger["stuck_op"]["age_s"] if trigger and trigger.get("stuck_op") else None
        result = {"case": {k: v for k, v in case.items() if k != "truth"}, "truth": case["truth"],
                  # How long each rank held PyTorch's abort for its dumps (the watchdog's line).
                  "abort_held_ms": [int(ms) for ms in re.findall(r"\]: (?:SIGABRT|ncclCommAbort) held (\d+) ms", output)]}
        if trigger is None and not list(fr_dir.glob("rank_*")):
            # torchrun ends the whole group at once when a worker dies (no --max-restarts): the
            # job failed, nothing hung, and neither tool has anything to say.
            said = {"outcome": "no-hang", "why": "the launcher ended the job, nothing hung", "said": "", "seconds": None}
            result["fr_trace"], result["hangwatch"] = dict(said), dict(said)
            return result

        t0 = time.time()
        fr = subprocess.run([str(venv / "bin" / "python"), "-m", "torch.distributed.flight_recorder.fr_trace",
                             str(fr_dir), "-p", "rank_", "--allow-incomplete-ranks"],
                            capture_output=True, text=True, timeout=300)
        fr_s = time.time() - t0
        fr_files = list(fr_dir.glob("rank_*"))
        fr_out = fr.stdout + fr.stderr
        # Its findings go to its log (stderr) as well as stdout.
        outcome, why = fr_trace_judge(fr_out, case["truth"]) if fr_files else ("wrong", "no Flight Recorder dump")
        result["fr_trace"] = {"outcome": outcome, "why": why, "dumps": len(fr_files),
                              "said": (first_line(fr_out, r".*[Cc]ulprit.*") or fr.stdout.strip()[-300:]),
                              "seconds": round(max(f.stat().st_mtime for f in fr_files) + fr_s - stall, 1)
                              if fr_files and stall else None}

        t0 = time.time()
        rep = subprocess.run([str(build / "forensics" / "forensics"), "report", str(job_dir), "--format", "json",
                              "--wait", "30"], capture_output=True, text=True, timeout=300)
        rep_s = time.time() - t0
        if rep.returncode == 0:
            verdict = json.loads(rep.stdout)["verdict"]
            outcome, why = hangwatch_judge(verdict, case["truth"])
            outcome = "wrong" if outcome == "missed" else outcome
            states = list((job_dir / "ranks").glob("r*.state.json"))
            done = max(f.stat().st_mtime for f in states) if states else time.time()
            result["hangwatch"] = {"outcome": outcome, "why": why, "said": verdict.get("headline"),
                                   "seconds": round(done + rep_s - stall, 1) if stall else None}
        else:
            result["hangwatch"] = {"outcome": "wrong", "why": f"report exited {rep.returncode}: {rep.stderr[-300:]}",
                                   "said": "", "seconds": None}
        if keep:
            (root / "job-output.txt").write_text(output)
            (root / "fr_trace.txt").write_text(fr_out)
        return result
    finally:
        if keep:
            dest = Path(keep) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{random.randrange(1 << 30)}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(root), dest)
        else:
            shutil.rmtree(root, True)


def hold_text(all_ms):
    """Median / max of the aborts that were held (an abort that came after the dumps were done
    goes on at once: 0 ms, counted apart)."""
    held = [ms for ms in all_ms if ms > 0]
    text = f"{statistics.median(held):.0f} / {max(held)}" if held else "-"
    return text + (f" (+{len(all_ms) - len(held)} after the dumps, not held)" if len(held) < len(all_ms) else "")


def table(rows):
    lines = ["| class | runs | no hang | Flight Recorder (fr_trace) r/h/w | median s | hangwatch r/h/w | median s | "
             "abort held ms (median / max) | what fr_trace said | what hangwatch said |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, results in rows.items():
        def rhw(tool):
            return "/".join(str(sum(r[tool]["outcome"] == o for r in results)) for o in ("right", "hedged", "wrong"))

        def med(tool):
            s = [r[tool]["seconds"] for r in results if r[tool]["seconds"] is not None]
            return f"{statistics.median(s):.1f}" if s else "-"

        hung = [r for r in results if r["hangwatch"]["outcome"] != "no-hang"]
        last = (hung or results)[-1]
        held_text = hold_text([ms for r in results for ms in r.get("abort_held_ms", [])])
        lines.append(f"| {name} | {len(results)} | {len(results) - len(hung)} | {rhw('fr_trace')} | {med('fr_trace')} | "
                     f"{rhw('hangwatch')} | {med('hangwatch')} | {held_text} | {last['fr_trace']['why']} | "
                     f"{last['hangwatch']['why']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build folder (default: build)")
    ap.add_argument("--runs", type=int, default=1, help="jobs per class (default: 1)")
    ap.add_argument("--classes", help="comma-separated classes (default: all; see --list)")
    ap.add_argument("--seed", type=int, help="random seed (default: from the clock, printed)")
    ap.add_argument("--json", help="write every run's results here")
    ap.add_argument("--keep", help="keep each run's dumps, Flight Recorder files and outputs under this folder")
    ap.add_argument("--pytorch-timeout", type=float, default=TIMEOUT_S,
                    help=f"init_process_group(timeout=) in seconds (default: {TIMEOUT_S})")
    ap.add_argument("--hangwatch-timeout", type=float, default=TIMEOUT_S,
                    help=f"HANGWATCH_TIMEOUT in seconds (default: {TIMEOUT_S}); above PyTorch's, PyTorch's watchdog "
                         "declares every hang and hangwatch holds its abort for the dumps")
    ap.add_argument("--abort-wait-ms", type=int, default=ABORT_WAIT_MS,
                    help=f"TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC: PyTorch's wait from its timeout to its SIGABRT "
                         f"(default: {ABORT_WAIT_MS}; PyTorch's own default is 15000)")
    ap.add_argument("--list", action="store_true", help="print the classes and exit")
    args = ap.parse_args()
    if args.list:
        for name, (_, what) in CLASSES.items():
            print(f"{name:18} {what}")
        return 0
    names = args.classes.split(",") if args.classes else list(CLASSES)
    if unknown := [n for n in names if n not in CLASSES]:
        ap.error(f"unknown class(es) {', '.join(unknown)}; --list shows them")
    build = Path(args.build).resolve()
    venv = Path(os.environ.get("HANGWATCH_TORCH_VENV", Path.home() / ".cache" / "hangwatch" / "torch-venv"))
    for need in (build / "watchdog" / "libhangwatch.so", build / "simgpu-dropin" / "simgpu-run", venv / "bin" / "python"):
        if not need.exists():
            ap.error(f"{need} is missing (build the project; scripts/install-deps.sh --torch for the venv)")
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    print(f"vs_flight_recorder: seed {seed}, {args.runs} run(s) per class, classes {', '.join(names)}; timeouts: "
          f"PyTorch {args.pytorch_timeout:g} s, hangwatch {args.hangwatch_timeout:g} s; PyTorch's abort "
          f"{args.abort_wait_ms} ms after its timeout", flush=True)
    rows = {}
    for name in names:
        rows[name] = []
        for i in range(args.runs):
            case = CLASSES[name][0](rng)
            r = run(case, build, venv, args.keep, (args.pytorch_timeout, args.hangwatch_timeout), args.abort_wait_ms)
            rows[name].append(r)
            print(f"{name:18} {i + 1}  fr_trace {r['fr_trace']['outcome']:6} ({r['fr_trace']['why']})  "
                  f"hangwatch {r['hangwatch']['outcome']:6} ({r['hangwatch']['why']})", flush=True)
    print(table(rows))
    held = [ms for results in rows.values() for r in results for ms in r.get("abort_held_ms", [])]
    if held:
        print(f"PyTorch's aborts held for hangwatch's dumps, median / max ms: {hold_text(held)}")
    if args.json:
        settings = {"pytorch_timeout_s": args.pytorch_timeout, "hangwatch_timeout_s": args.hangwatch_timeout,
                    "abort_wait_ms": args.abort_wait_ms}
        Path(args.json).write_text(json.dumps({"seed": seed, **settings, "runs": rows}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
