#!/usr/bin/env python3
"""Collector benchmark: `forensics collect --backend host` (fast pass: native + Python
stacks) against `eu-stack -p` and `gdb -batch -ex 'thread apply all bt'` on the same
hung processes in the same run, 8 ranks collected in parallel against one, and a node's time
to done (8 collectors at once, as the watchdogs start them, until the last exits) with the
node summary (`--state --node 0-7`: the last one merges the node into nodes/<host>.json)
against without it, alternating, with the fast pass only and with the debugger phase, and the
same with the debugger phase's index cache (the debugger's symbol index kept on the node, by build
id) warm, cold (the node's first hang) and refused (none: the old way), alternating.
Reports medians and ratios; speed is never asserted (DESIGN.md §7).

  bench/collector_bench.py --build BUILD_DIR [--runs N] [--json FILE] [--only node-summary|index-cache]
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[1]
MPIRUN = SOURCE_DIR / "examples" / "mpirun.sh"
SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]


class Job:
    """A hung multi-rank job in its own session; kill() ends every process of it."""

    def __init__(self, nranks, argv, env, program):
        self.program = program
        self.lines = []
        self.proc = subprocess.Popen([str(MPIRUN), "-np", str(nranks), *argv], env={**os.environ, **env},
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_stuck(self, nranks, last_steps, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = "".join(self.lines)
            done = {}
            for m in re.finditer(rf"{self.program} rank=(\d+) step=(\d+) done", text):
                done[int(m[1])] = max(done.get(int(m[1]), -1), int(m[2]))
            if all(done.get(r, -1) >= s for r, s in last_steps.items()):
                time.sleep(2)
                pids = {int(m[1]): int(m[2]) for m in re.finditer(rf"{self.program} rank=(\d+) pid=(\d+)", text)}
                if len(pids) == nranks:
                    return pids
            time.sleep(0.2)
        raise RuntimeError(f"job did not hang as expected:\n{''.join(self.lines)[-2000:]}")

    def kill(self):
        sid = self.proc.pid
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) == sid:
                        os.kill(int(entry.name), 9)
                except (OSError, ValueError, IndexError):
                    pass
        self.proc.wait()


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def timed(cmd):
    """Wall and CPU seconds of one command (CPU: user+sys of the finished child)."""
    cpu = children_cpu()
    start = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}")
    return elapsed, children_cpu() - cpu


def thread_count(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def compare(name, pid, forensics, out, runs, gdb_runs):
    """Interleaved runs, so every tool sees the same machine load."""
    tools = {
        "forensics": [forensics, "collect", "--pid", str(pid), "--out", out, "--backend", "host"],
        "eu-stack": ["eu-stack", "-p", str(pid)],
        "gdb": ["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
    }
    times = {t: [] for t in tools}
    cpu = {t: [] for t in tools}
    fast_pass = []
    for i in range(runs):
        for tool, cmd in tools.items():
            if tool == "gdb" and i >= gdb_runs:
                continue
            elapsed, cpu_s = timed(cmd)
            times[tool].append(elapsed)
            cpu[tool].append(cpu_s)
            if tool == "forensics":
                dump = json.loads((Path(out) / "ranks" / f"p{pid}.forensics.json").read_text())
                fast_pass.append(sum(p["seconds"] for p in dump["phases"] if p["name"] in ("attach", "unwind", "python", "detach")))
    dump = json.loads((Path(out) / "ranks" / f"p{pid}.forensics.json").read_text())
    python_frames = sum(1 for t in dump["threads"] for f in t["frames"] if f["kind"] == "python")
    med = {t: statistics.median(v) for t, v in times.items()}
    # The debugger phase (gdb with the collector's script), reported on its own.
    timed([forensics, "collect", "--pid", str(pid), "--out", out, "--backend", "sim"])
    dump_sim = json.loads((Path(out) / "ranks" / f"p{pid}.forensics.json").read_text())
    debugger_s = next(p["seconds"] for p in dump_sim["phases"] if p["name"] == "debugger")
    return {
        "target": name, "pid": pid, "threads": thread_count(pid), "python_frames": python_frames,
        "runs": {t: len(v) for t, v in times.items()},
        "median_s": med, "cpu_median_s": {t: statistics.median(v) for t, v in cpu.items()},
        "fast_pass_phase_median_s": statistics.median(fast_pass),
        "debugger_phase_s": debugger_s,
        "ratio_forensics_over_eu_stack": med["forensics"] / med["eu-stack"],
        "speedup_over_gdb": med["gdb"] / med["forensics"],
    }


def parallel(pids, forensics, out, runs):
    """Wall time to collect all ranks at once against one rank alone."""
    one, many = [], []
    ranks = sorted(pids)
    for _ in range(runs):
        one.append(timed([forensics, "collect", "--pid", str(pids[ranks[0]]), "--rank", str(ranks[0]),
                          "--out", out, "--backend", "host"])[0])
        start = time.perf_counter()
        procs = [subprocess.Popen([forensics, "collect", "--pid", str(pids[r]), "--rank", str(r), "--out", out,
                                   "--backend", "host"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
                 for r in ranks]
        codes = [p.wait() for p in procs]
        many.append(time.perf_counter() - start)
        if any(codes):
            raise RuntimeError(f"parallel collection failed: {codes}")
    return {"ranks": len(ranks), "one_median_s": statistics.median(one), "all_median_s": statistics.median(many),
            "ratio_all_over_one": statistics.median(many) / statistics.median(one), "cpus": os.cpu_count()}


def node_time_to_done(pids, forensics, out, args, env=None, ok=(0, 3)):
    """Every rank's collector started at once (`collect --pid P --rank R --state ARGS --out OUT`),
    as the watchdogs start them: seconds until the last one exits (an exit code not in `ok` fails)."""
    start = time.perf_counter()
    procs = [subprocess.Popen([forensics, "collect", "--pid", str(pids[r]), "--rank", str(r), "--state", *args,
                               "--out", out], env={**os.environ, **(env or {})},
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT) for r in sorted(pids)]
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - start
    if any(c not in ok for c in codes):
        raise RuntimeError(f"collection failed: {codes} (kept in {out})")
    return elapsed


def node_summary(pids, forensics, runs, backend):
    """A node's time to done: all its collectors started at once, until the last one exits,
    with the node summary and without, alternating (each run in a fresh job folder)."""
    node = ",".join(str(r) for r in sorted(pids))
    times = {"with": [], "without": []}
    for i in range(2 * runs):
        which = "with" if i % 2 == 0 else "without"
        out = tempfile.mkdtemp(prefix="collector-bench-node-")
        args = [*(["--node", node] if which == "with" else []), "--backend", backend]
        times[which].append(node_time_to_done(pids, forensics, out, args))
        if which == "with":
            # The last collector wrote it before exiting (a waiter may still be about: let it end).
            summaries = list((Path(out) / "nodes").glob("*.json"))
            if len(summaries) != 1:
                raise RuntimeError(f"no node summary in {out}")
            time.sleep(1.5)
        shutil.rmtree(out, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"backend": backend, "ranks": len(pids), "runs": runs, "with_median_s": med["with"],
            "without_median_s": med["without"], "ratio_with_over_without": med["with"] / med["without"]}


def index_cache(pids, forensics, runs):
    """A node's time to done with the debugger phase (every collector at once, backend sim) and
    the debugger's index cache warm, cold (a fresh $TMPDIR: the node's first hang) or refused
    (none: its folder's name taken by a file, which the collector will not use), alternating."""
    node_ranks = ",".join(str(r) for r in sorted(pids))  # as the watchdogs start them: the first fills the cache
    base = Path(tempfile.mkdtemp(prefix="collector-bench-index-"))
    name = f"hangwatch-gdb-index-{os.geteuid()}"
    refused, warm = base / "refused", base / "warm"
    refused.mkdir()
    (refused / name).write_text("not a folder\n")
    warm.mkdir()
    times = {"warm": [], "cold": [], "none": []}

    def node(tmpdir):
        out = tempfile.mkdtemp(prefix="collector-bench-node-")
        args = ["--node", node_ranks, "--backend", "sim", "--no-ras"]
        elapsed = node_time_to_done(pids, forensics, out, args, env={"TMPDIR": str(tmpdir)}, ok=(0,))
        time.sleep(1.5)  # a node summary's waiter may still be about: let it end
        shutil.rmtree(out, ignore_errors=True)
        return elapsed

    try:
        node(warm)  # fills it
        if not any((warm / name).iterdir()):
            raise RuntimeError(f"the debugger left nothing in {warm / name}")
        for i in range(runs):
            cold = base / f"cold-{i}"
            cold.mkdir()
            for which, tmpdir in (("warm", warm), ("cold", cold), ("none", refused)):
                times[which].append(node(tmpdir))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"ranks": len(pids), "runs": runs, **{f"{k}_median_s": v for k, v in med.items()},
            "ratio_warm_over_none": med["warm"] / med["none"], "ratio_cold_over_none": med["cold"] / med["none"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with forensics and the examples")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--gdb-runs", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--only", choices=["node-summary", "index-cache"], help="run only this part")
    args = ap.parse_args()
    build = Path(args.build).resolve()
    forensics = str(build / "forensics" / "forensics")
    ring_train = str(build / "examples" / "ring_train" / "ring_train")
    shim = str(build / "examples" / "python_train" / "libtrainshim.so")
    for tool in ("eu-stack", "gdb"):
        if shutil.which(tool) is None:
            sys.exit(f"collector_bench: {tool} not found")
    out = tempfile.mkdtemp(prefix="collector-bench-")
    results = {"machine": {"cpus": os.cpu_count(), "load": os.getloadavg()}}
    # 4 channels: a hung rank has main, dataloader, stream worker, MPI threads and 4 simnccl-ch threads.
    ring_env = {"SIMGPU_FAULTS": "dead-link=1->2@op=10", "SIMGPU_NCHANNELS": "4"}
    job = Job(8, [ring_train, "--steps", "50", *SMALL_MODEL], ring_env, "ring_train")
    try:
        pids = job.wait_stuck(8, {r: 9 for r in range(8)})
        if args.only != "index-cache":
            results["node_summary_host"] = node_summary(pids, forensics, max(3, args.runs // 2), "host")
            results["node_summary_sim"] = node_summary(pids, forensics, max(3, args.runs // 5), "sim")
        if args.only != "node-summary":
            results["index_cache"] = index_cache(pids, forensics, max(3, args.runs // 3))
        if not args.only:
            results["ring_train_rank"] = compare("ring_train rank 1 (hung, dead link)", pids[1], forensics, out,
                                                 args.runs, args.gdb_runs)
            results["parallel"] = parallel(pids, forensics, out, max(3, args.runs // 3))
    finally:
        job.kill()
    for key in ("node_summary_host", "node_summary_sim"):
        if key not in results:
            continue
        n = results[key]
        print(f"node time to done ({n['ranks']} collectors at once, backend {n['backend']}, {n['runs']} runs each): "
              f"with the node summary {n['with_median_s'] * 1000:.0f} ms, without {n['without_median_s'] * 1000:.0f} ms"
              f" -> ratio {n['ratio_with_over_without']:.3f} (target <= 1.10)")
    if "index_cache" in results:
        n = results["index_cache"]
        print(f"node time to done with the debugger phase ({n['ranks']} collectors at once, {n['runs']} runs each): "
              f"index cache warm {n['warm_median_s'] * 1000:.0f} ms, cold {n['cold_median_s'] * 1000:.0f} ms, "
              f"none {n['none_median_s'] * 1000:.0f} ms -> ratio warm/none {n['ratio_warm_over_none']:.3f}, "
              f"cold/none {n['ratio_cold_over_none']:.3f}")
    if args.only:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return
    py = Job(2, [sys.executable, str(SOURCE_DIR / "examples" / "python_train" / "train.py"), "--steps", "50",
                 "--grad-mb", "1", "--hidden", "128", "--stall-rank", "1", "--stall-at-step", "5",
                 "--stall-kind", "dataloader"], {"TRAIN_SHIM": shim, "SIMGPU_NCHANNELS": "4"}, "python_train")
    try:
        pids = py.wait_stuck(2, {1: 4})
        results["python_rank"] = compare("python_train rank 1 (dataloader deadlock)", pids[1], forensics, out,
                                         args.runs, args.gdb_runs)
    finally:
        py.kill()
    shutil.rmtree(out, ignore_errors=True)

    for key in ("ring_train_rank", "python_rank"):
        r = results[key]
        m = r["median_s"]
        print(f"{r['target']}: {r['threads']} threads, {r['python_frames']} Python frames")
        print(f"  forensics collect --backend host  {m['forensics'] * 1000:8.1f} ms (fast-pass phases "
              f"{r['fast_pass_phase_median_s'] * 1000:.1f} ms)")
        c = r["cpu_median_s"]
        print(f"  eu-stack -p                       {m['eu-stack'] * 1000:8.1f} ms")
        print(f"  gdb -batch thread apply all bt    {m['gdb'] * 1000:8.1f} ms")
        print(f"  CPU (user+sys): forensics {c['forensics'] * 1000:.1f} ms, eu-stack {c['eu-stack'] * 1000:.1f} ms, "
              f"gdb {c['gdb'] * 1000:.1f} ms")
        print(f"  ratio forensics/eu-stack {r['ratio_forensics_over_eu_stack']:.2f} (target <= 2), "
              f"gdb/forensics {r['speedup_over_gdb']:.1f}x (target >= 5)")
        print(f"  debugger phase (gdb + collector_probe.py, reported separately) {r['debugger_phase_s'] * 1000:.0f} ms")
    p = results["parallel"]
    print(f"{p['ranks']} ranks in parallel: {p['all_median_s'] * 1000:.1f} ms vs one rank {p['one_median_s'] * 1000:.1f} ms"
          f" -> ratio {p['ratio_all_over_one']:.2f} (target <= 2) on {p['cpus']} CPUs")
    cpu_one = results.get("ring_train_rank", {}).get("cpu_median_s", {}).get("forensics")
    if cpu_one:
        floor = p["ranks"] * cpu_one / p["cpus"]
        print(f"  floor for CPU-bound collections: {p['ranks']} x {cpu_one * 1000:.1f} ms CPU / {p['cpus']} CPUs "
              f"= {floor * 1000:.1f} ms (ratio {floor / p['one_median_s']:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
