"""Hung jobs for the report scenarios: run a simgpu job under libhangwatch.so with the
collector on, wait until every rank has dumped, kill the job, and run `forensics report`
on what it left. Also usable by hand:
    python3 tests/e2e/report_jobs.py dead-link /tmp/jobs   (prints the job dir)"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import MpiJob, ring_train_binary, train_py

SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]
JOB_ID = "e2e-report"


def build_dir():
    # ring_train lives in <build>/examples/ring_train/.
    return Path(ring_train_binary()).resolve().parents[2]


def hangwatch_lib():
    return os.environ.get("HANGWATCH_LIB", str(build_dir() / "watchdog" / "libhangwatch.so"))


def forensics_binary():
    return os.environ.get("FORENSICS", str(build_dir() / "forensics" / "forensics"))


def watchdog_env(dump_root, timeout_s=3, faults=""):
    return {"LD_PRELOAD": hangwatch_lib(), "HANGWATCH_DUMP_DIR": str(dump_root), "HANGWATCH_JOB_ID": JOB_ID,
            "HANGWATCH_TIMEOUT": str(timeout_s), "HANGWATCH_COLLECT": "1", "HANGWATCH_COLLECT_WAIT": "60",
            "HANGWATCH_FORENSICS": forensics_binary(), "SIMGPU_FAULTS": faults}


# name -> (ranks, program, argv after the program, faults)
SCENARIOS = {
    "dead-link": (4, "ring_train", [], "dead-link=1->2@op=10"),
    "dead-rank": (4, "ring_train", [], "dead-rank=2@op=10"),
    "host-loop": (4, "ring_train", ["--stall-rank", "2", "--stall-at-step", "5", "--stall-kind", "host-loop"], ""),
    "mismatch": (4, "ring_train", ["--mismatch-rank", "1", "--mismatch-at-step", "5"], ""),
    "py-dataloader": (4, "python_train", ["--stall-rank", "1", "--stall-at-step", "5", "--stall-kind", "dataloader"],
                      ""),
    "py-dead-link": (4, "python_train", [], "dead-link=2->3@op=6"),
    "dead-link-8": (8, "ring_train", [], "dead-link=5->6@op=8"),
    "healthy": (4, "ring_train", [], ""),
}


def job_argv(program, args, steps):
    if program == "python_train":
        return [sys.executable, train_py(), "--steps", str(steps), "--grad-mb", "1", "--hidden", "128", *args]
    return [ring_train_binary(), "--steps", str(steps), *SMALL_MODEL, *args]


def dumps_complete(job_dir, nranks):
    ranks = Path(job_dir) / "ranks"
    return all((ranks / f"r{r:05d}.watchdog.json").exists() and (ranks / f"r{r:05d}.forensics.json").exists()
               for r in range(nranks))


def run_hung_job(name, dump_root, wait_s=90):
    """Runs scenario `name` until every rank dumped (or wait_s passed); returns (job_dir, job output)."""
    nranks, program, args, faults = SCENARIOS[name]
    job_dir = Path(dump_root) / JOB_ID
    env = watchdog_env(dump_root, faults=faults)
    with MpiJob(nranks, job_argv(program, args, 50), env=env, program=program) as job:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not dumps_complete(job_dir, nranks):
            if job.proc.poll() is not None:
                break
            time.sleep(0.5)
        return job_dir, job.output()


def run_healthy_job(dump_root, steps=8):
    nranks, program, args, faults = SCENARIOS["healthy"]
    env = watchdog_env(dump_root, timeout_s=20, faults=faults)
    env["HANGWATCH_METRICS_INTERVAL"] = "1"
    with MpiJob(nranks, job_argv(program, args, steps), env=env, program=program) as job:
        code = job.wait_exit(90)
        return Path(dump_root) / JOB_ID, job.output(), code


def report(job_dir, fmt="json", extra=()):
    """Runs `forensics report`; returns (exit code, stdout, stderr)."""
    r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", fmt, *extra],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def report_json(job_dir):
    code, out, err = report(job_dir, "json")
    if code != 0:
        raise AssertionError(f"forensics report exited {code}: {err}")
    return json.loads(out)


if __name__ == "__main__":
    scenario, root = sys.argv[1], sys.argv[2]
    if scenario == "healthy":
        print(run_healthy_job(root)[0])
    else:
        d, out = run_hung_job(scenario, root)
        print(d)
