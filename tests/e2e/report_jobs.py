"""Hung jobs for the report scenarios: run a simgpu job under libhangwatch.so with the
collector on and HANGWATCH_ON_HANG=abort, as a job that its launcher restarts would: every
rank dumps, waits until every rank's dumps are done, and exits; the launcher (mpirun, or a
torchrun- or srun-like one) then returns and `forensics report` runs at once on what the
job left. Also usable by hand:
    python3 tests/e2e/report_jobs.py dead-link /tmp/jobs   (prints the job dir)"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import MpiJob, ring_train_binary, train_py, torchrun_like, srun_like

SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]
JOB_ID = "e2e-report"


def build_dir():
    # ring_train lives in <build>/examples/ring_train/.
    return Path(ring_train_binary()).resolve().parents[2]


def hangwatch_lib():
    return os.environ.get("HANGWATCH_LIB", str(build_dir() / "watchdog" / "libhangwatch.so"))


def forensics_binary():
    return os.environ.get("FORENSICS", str(build_dir() / "forensics" / "forensics"))


def every_json_whole(folder):
    """The dump files under `folder` a reader would take as written that do not parse whole."""
    torn = []
    for f in Path(folder).rglob("*.json"):
        if ".tmp." in f.name:
            continue
        try:
            json.loads(f.read_text())
        except ValueError:
            torn.append(str(f))
    return torn


def free_ras_address():
    """A port of its own for the job's NCCL RAS (NCCL_RAS_ADDR): every process binds the RAS port
    with SO_REUSEPORT, so jobs run side by side on the default one would answer each other's
    questions, as two jobs sharing a node would in a real cluster."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def watchdog_env(dump_root, timeout_s=3, faults=""):
    return {"LD_PRELOAD": hangwatch_lib(), "HANGWATCH_DUMP_DIR": str(dump_root), "HANGWATCH_JOB_ID": JOB_ID,
            "HANGWATCH_TIMEOUT": str(timeout_s), "HANGWATCH_COLLECT": "1", "HANGWATCH_COLLECT_WAIT": "60",
            "HANGWATCH_FORENSICS": forensics_binary(), "SIMGPU_FAULTS": faults, "NCCL_RAS_ADDR": free_ras_address()}


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
    "dead-link-8-3to4": (8, "ring_train", [], "dead-link=3->4@op=8"),
    # On two nodes of 4 (as_node.py): rank 3's GPU is device 3, whose NIC carries 3 -> 4.
    "dead-nic-8": (8, "ring_train", [], "dead-nic=node-0:mlx5_3@op=8"),
    # One rank per node (as_node.py 1): rank 3's NIC carries both of its ring links.
    "dead-nic-4": (4, "ring_train", [], "dead-nic=node-3:mlx5_3@op=6"),
    "dead-rank-8": (8, "ring_train", [], "dead-rank=5@op=8"),
    "dead-rank-6": (6, "ring_train", [], "dead-rank=3@op=6"),
    "host-loop-6": (6, "ring_train", ["--stall-rank", "4", "--stall-at-step", "4", "--stall-kind", "host-loop"], ""),
    "mismatch-8": (8, "ring_train", ["--mismatch-rank", "6", "--mismatch-at-step", "4"], ""),
    "healthy": (4, "ring_train", [], ""),
}


def device_ring_binary():
    return os.environ.get("DEVICE_RING", str(build_dir() / "examples" / "device_ring" / "device_ring"))


def job_argv(program, args, steps):
    if program == "device_ring":
        return [device_ring_binary(), "--steps", str(steps), "--log-every", str(steps), *args]
    if program == "python_train":
        return [sys.executable, train_py(), "--steps", str(steps), "--grad-mb", "1", "--hidden", "128", *args]
    return [ring_train_binary(), "--steps", str(steps), *SMALL_MODEL, *args]


def dumps_complete(job_dir, nranks):
    ranks = Path(job_dir) / "ranks"
    return all((ranks / f"r{r:05d}.watchdog.json").exists() and (ranks / f"r{r:05d}.forensics.json").exists()
               for r in range(nranks))


LAUNCHERS = {"mpirun": None, "torchrun": torchrun_like, "srun": srun_like}


AS_NODE = Path(__file__).resolve().parent / "launchers" / "as_node.py"


def can_run_as_nodes():
    """Whether this machine lets a rank take a hostname of its own (a UTS namespace: root)."""
    probe = subprocess.run([sys.executable, str(AS_NODE), "1", "--", "true"], capture_output=True, text=True)
    return probe.returncode == 0


def run_hung_job(name, dump_root, launcher="mpirun", wait_s=240, extra_env=None, ranks_per_node=None):
    """Runs scenario `name` in abort mode under `launcher` until the launcher returns; returns
    (job_dir, job output, launcher exit code or None when it was still running after wait_s).
    Under torchrun and srun the job id comes from the launcher (TORCHELASTIC_RUN_ID, SLURM_JOB_ID).
    `ranks_per_node`: each rank runs as host node-<rank // N> (launchers/as_node.py), so the job
    spans several machines as NCCL and the report see them."""
    nranks, program, args, faults = SCENARIOS[name]
    env = watchdog_env(dump_root, faults=faults)
    env["HANGWATCH_ON_HANG"] = "abort"
    prefix = LAUNCHERS[launcher](nranks) if LAUNCHERS[launcher] else None
    job_id = JOB_ID
    if launcher == "torchrun":
        env["HANGWATCH_JOB_ID"] = ""
        job_id = "e2e-torchrun"
    elif launcher == "srun":
        env["HANGWATCH_JOB_ID"] = ""
        job_id = "4242"
    env.update(extra_env or {})
    argv = job_argv(program, args, 50)
    if ranks_per_node:
        env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
        argv = [sys.executable, str(AS_NODE), str(ranks_per_node), "--", *argv]
    with MpiJob(nranks, argv, env=env, program=program, launcher=prefix) as job:
        code = job.wait_exit(wait_s)
        return Path(dump_root) / job_id, job.output(), code


def run_healthy_job(dump_root, steps=8):
    nranks, program, args, faults = SCENARIOS["healthy"]
    env = watchdog_env(dump_root, timeout_s=20, faults=faults)
    env["HANGWATCH_METRICS_INTERVAL"] = "1"
    with MpiJob(nranks, job_argv(program, args, steps), env=env, program=program) as job:
        code = job.wait_exit(90)
        return Path(dump_root) / JOB_ID, job.output(), code


def report(job_dir, fmt="json", extra=()):
    """Runs `forensics report` (with its default --wait); returns (exit code, stdout, stderr).
    When the job's nodes wrote summaries (nodes/<host>.json) and every rank is done, also checks
    that the report from them is, byte for byte, the one from the rank files (--flat)."""
    r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", fmt, *extra],
                       capture_output=True, text=True, timeout=240)
    if r.returncode == 0:
        assert_summaries_give_flat_report(job_dir, fmt)
    return r.returncode, r.stdout, r.stderr


def all_ranks_done(job_dir):
    for f in (Path(job_dir) / "ranks").glob("r*.state.json"):
        try:
            if json.loads(f.read_text()).get("state") != "done":
                return False
        except ValueError:
            return False
    return True


def assert_summaries_give_flat_report(job_dir, fmt="json"):
    """The report read through the node summaries equals the one read from every rank's files."""
    if not list((Path(job_dir) / "nodes").glob("*.json")) or not all_ranks_done(job_dir):
        return
    def one(*more):
        r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", fmt, "--wait", "0", "--no-save",
                            *more], capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            raise AssertionError(f"forensics report {' '.join(more)} exited {r.returncode}: {r.stderr}")
        return r.stdout
    merged, flat = one(), one("--flat")
    if merged != flat:
        import difflib
        diff = "".join(list(difflib.unified_diff(flat.splitlines(True), merged.splitlines(True), "flat",
                                                 "node summaries"))[:60])
        raise AssertionError(f"the report from the node summaries of {job_dir} differs from the flat one:\n{diff}")


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
        d, out, code = run_hung_job(scenario, root)
        print(d)
