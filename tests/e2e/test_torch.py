"""Unmodified PyTorch (the pinned CUDA 13 wheel) under the real torchrun, on simgpu through
simgpu-run, with libhangwatch.so preloaded: examples/torch_ddp/train.py, a DistributedDataParallel
job on the NCCL backend. A healthy job is left alone and timed; a dead link inside DDP's
all-reduce, a GPU that stops and a rank stuck in Python are named, with every rank's stacks
dumped while PyTorch's own watchdog thread is still there."""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from e2e_case import E2ECase
from harness import MpiJob, SOURCE_DIR
from report_jobs import AS_NODE, can_run_as_nodes
from slurm_cluster import free_port

TRAIN = SOURCE_DIR / "examples" / "torch_ddp" / "train.py"
PROGRAM = "torch_ddp"
JOB_ID = "e2e-torch"
# Frames of PyTorch's NCCL watchdog thread (ProcessGroupNCCL's timeout watchdog loop).
TORCH_WATCHDOG_FRAME = "ProcessGroupNCCL::timeoutWatchdog"


def build_dir():
    return Path(os.environ.get("RING_TRAIN", SOURCE_DIR / "build" / "examples" / "ring_train" / "ring_train")
                ).resolve().parents[2]


def torch_venv():
    return Path(os.environ.get("HANGWATCH_TORCH_VENV", Path.home() / ".cache" / "hangwatch" / "torch-venv"))


def simgpu_run():
    return Path(os.environ.get("SIMGPU_DROPIN_DIR", build_dir() / "simgpu-dropin")) / "simgpu-run"


def forensics():
    return os.environ.get("FORENSICS", str(build_dir() / "forensics" / "forensics"))


def job_env(dump_root, timeout_s, faults, extra_env):
    """The watchdog preloaded into every process of a torchrun job, dumping under `dump_root`."""
    return {"LD_PRELOAD": str(build_dir() / "watchdog" / "libhangwatch.so"), "HANGWATCH_DUMP_DIR": str(dump_root),
            "HANGWATCH_JOB_ID": JOB_ID, "HANGWATCH_TIMEOUT": str(timeout_s), "HANGWATCH_FORENSICS": forensics(),
            "SIMGPU_FAULTS": faults, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", **(extra_env or {})}


def torchrun_job(nranks, args, dump_root, faults="", extra_env=None, timeout_s=5, per_node=None, script=None):
    """`simgpu-run torchrun --standalone --nproc-per-node N train.py ARGS` under the watchdog;
    with `per_node`, each rank runs under as_node.py as a host of its own node (root only)."""
    env = job_env(dump_root, timeout_s, faults, extra_env)
    launcher = [str(simgpu_run()), str(torch_venv() / "bin" / "torchrun"), "--standalone", "--nproc-per-node",
                str(nranks)]
    argv = [str(script or TRAIN), *args]
    if per_node:
        launcher.append("--no-python")
        argv = [str(AS_NODE), str(per_node), "--", str(torch_venv() / "bin" / "python"), *argv]
    return MpiJob(nranks, argv, env=env, program=PROGRAM, launcher=launcher)


def torchrun_nodes_job(per_agent, args, dump_root, extra_env=None, timeout_s=5, script=None):
    """One real torchrun agent per node, as a multi-node job runs: `per_agent[i]` workers under
    agent i (`--nnodes len(per_agent) --node-rank i`, static rendezvous on this machine), each
    worker a host of its own node (`node-i`, as_node.py; root only). An agent sees only its own
    workers: when one of them dies, that agent ends its node's part of the job, and the other
    agents' workers are left waiting on the dead one, as on a real cluster."""
    # as_node.py places rank r on node-(r // N): every agent but the last has N workers.
    assert all(count == per_agent[0] for count in per_agent[:-1]), per_agent
    env = job_env(dump_root, timeout_s, "", extra_env)
    port = free_port()
    agents = []
    for node, count in enumerate(per_agent):
        agents.append([str(simgpu_run()), str(torch_venv() / "bin" / "torchrun"), "--nnodes", str(len(per_agent)),
                       "--node-rank", str(node), "--nproc-per-node", str(count), "--rdzv-backend", "static",
                       "--master-addr", "127.0.0.1", "--master-port", str(port), "--no-python",
                       str(AS_NODE), str(per_agent[0]), "--",
                       str(torch_venv() / "bin" / "python"), str(script or TRAIN), *args])
    # Every agent in the background, the shell waits for all: one process group, killed as one.
    script_text = " & ".join(" ".join(shlex.quote(a) for a in argv) for argv in agents) + " & wait"
    return MpiJob(sum(per_agent), [], env=env, program=PROGRAM, launcher=["bash", "-c", script_text])


def run_forensics(*args, timeout=120):
    return subprocess.run([forensics(), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def states(job_dir, nranks):
    out = {}
    for rank in range(nranks):
        try:
            out[rank] = json.loads((Path(job_dir) / "ranks" / f"r{rank:05d}.state.json").read_text())["state"]
        except (OSError, ValueError, KeyError):
            out[rank] = None
    return out


def main_thread_python_frames(dump):
    main = next(t for t in dump["threads"] if t["tid"] == dump["pid"])
    return [f for f in main["frames"] if f.get("kind") == "python"]


class TorchCase(E2ECase):
    def setUp(self):
        python = torch_venv() / "bin" / "python"
        missing = [str(p) for p in (python, simgpu_run(), Path(forensics())) if not p.exists()]
        if missing:
            if os.environ.get("HANGWATCH_REQUIRE_TORCH"):
                self.fail(f"missing {', '.join(missing)} (scripts/install-deps.sh --torch, and the build)")
            self.skipTest(f"missing {', '.join(missing)} (scripts/install-deps.sh --torch makes the venv)")
        self.tmp = tempfile.TemporaryDirectory(prefix="hangwatch-torch-")
        self.addCleanup(self.tmp.cleanup)
        self.dumps = Path(self.tmp.name) / "dumps"
        self.job_dir = self.dumps / JOB_ID

    def wait_for_dumps(self, job, nranks, timeout=150, ranks=None):
        """Every rank's dumps done (or those of `ranks`: the survivors of a rank that died), the
        job's ranks still alive (the default HANGWATCH_ON_HANG=wait)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = states(self.job_dir, nranks)
            if all(now[r] == "done" for r in (range(nranks) if ranks is None else ranks)):
                return
            if job.proc.poll() is not None:
                self.fail(f"the job ended before its dumps were done:\n{job.output()[-4000:]}")
            time.sleep(0.5)
        self.fail(f"dumps not done after {timeout}s: {states(self.job_dir, nranks)}\n{job.output()[-4000:]}")

    def report(self):
        result = run_forensics("report", self.job_dir, "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def dumps_of(self, nranks):
        return {r: json.loads((self.job_dir / "ranks" / f"r{r:05d}.forensics.json").read_text()) for r in range(nranks)}

    def assert_dumped_with_torch_alive(self, job, nranks):
        """Every rank dumped stacks with the training loop's Python frames, PyTorch's own NCCL
        watchdog thread among them, and no process ended (PyTorch's timeout is 10 minutes away)."""
        dumps = self.dumps_of(nranks)
        for rank, dump in dumps.items():
            frames = main_thread_python_frames(dump)
            self.assertTrue(any(f.get("file", "").endswith("torch_ddp/train.py") for f in frames),
                            f"rank {rank}: no train.py frame in the main thread: {frames}")
            native = [f["function"] for t in dump["threads"] for f in t["frames"]]
            self.assertTrue(any(TORCH_WATCHDOG_FRAME in f for f in native),
                            f"rank {rank}: no thread of PyTorch's watchdog ({TORCH_WATCHDOG_FRAME})")
            self.assertTrue(Path(f"/proc/{dump['pid']}").exists(), f"rank {rank} (pid {dump['pid']}) is gone")
        self.assertIsNone(job.proc.poll(), "torchrun ended while the job was hung")
        return dumps


class HealthyJob(TorchCase):
    def test_four_ranks_fifty_steps_are_timed_and_left_alone(self):
        with torchrun_job(4, ["--steps", "50"], self.dumps, extra_env={"HANGWATCH_METRICS_INTERVAL": "2"}) as job:
            out = self.assert_completes(job, timeout=240)
        self.assertIn(f"{PROGRAM} summary ranks=4 steps=50", out)
        self.assertFalse((self.job_dir / "TRIGGER.json").exists())
        self.assertFalse((self.job_dir / "SUSPECT.json").exists())
        for rank in range(4):
            windows = [json.loads(line) for line in
                       (self.job_dir / "metrics" / f"r{rank:05d}.jsonl").read_text().splitlines() if line]
            ops = [op for w in windows for op in w["ops"]]
            reduces = [op for op in ops if op["n"] == "ncclAllReduce"]
            # DDP's gradient buckets (bucket_cap_mb 0.25) and the logged loss, every step.
            self.assertGreaterEqual(len({op["b"] for op in reduces if op["b"] > 100_000}), 2, reduces)
            self.assertGreaterEqual(sum(op["cnt"] for op in reduces), 50 * 3)
            gemms = [op for op in ops if op["c"] == "gemm"]
            self.assertTrue({op["n"] for op in gemms} & {"cublasLtMatmul", "cublasGemmEx", "cublasSgemm_v2"}, gemms)
            self.assertGreaterEqual(sum(op["cnt"] for op in gemms), 50 * 10)
        timeline = json.loads((self.job_dir / "timeline" / "r00000.json").read_text())
        self.assertIn("ncclAllReduce", json.dumps(timeline))
        analyzed = run_forensics("analyze", self.job_dir, "--format", "json")
        self.assertEqual(analyzed.returncode, 0, analyzed.stderr)
        self.assertEqual(json.loads(analyzed.stdout)["findings"], [], analyzed.stdout)
        trace = Path(self.tmp.name) / "trace.json"
        made = run_forensics("timeline", self.job_dir, "-o", trace)
        self.assertEqual(made.returncode, 0, made.stderr)
        events = json.loads(trace.read_text())["traceEvents"]
        for rank in range(4):
            reduces = [e["args"] for e in events if e.get("pid") == rank and e.get("name") == "ncclAllReduce"]
            seqs = [a["seq"] for a in reduces]
            self.assertGreaterEqual(len(seqs), 50 * 3, f"rank {rank}")
            self.assertEqual(len(seqs), len(set(seqs)), f"rank {rank}: a seq number twice")
            self.assertTrue(all(a["bytes"] > 0 for a in reduces))
        names = {e.get("name", "") for e in events}
        self.assertTrue(names & {"cublasLtMatmul", "cublasGemmEx", "cublasSgemm_v2"}, sorted(names)[:40])


class HungJob(TorchCase):
    def test_dead_link_inside_ddps_all_reduce_is_named(self):
        with torchrun_job(4, ["--steps", "100"], self.dumps, faults="dead-link=1->2@op=20",
                          extra_env={"NCCL_ALGO": "Ring"}) as job:
            self.wait_for_dumps(job, 4)
            self.assert_dumped_with_torch_alive(job, 4)
            verdict = self.report()["verdict"]
        self.assertEqual(verdict["kind"], "communication-hang", verdict)
        self.assertEqual(verdict["culprit_link"], {"from": 1, "to": 2}, verdict)
        self.assertTrue(verdict["confident"], verdict)
        self.assertEqual(verdict["op"]["name"], "ncclAllReduce", verdict)

    def test_dead_link_between_two_nodes_on_nccls_own_algorithm_is_named(self):
        # Two nodes of two: NCCL's cost model runs DDP's mid-size all-reduces on the tree, whose
        # nodes join at ranks 0 and 2; the debugger reads the tree's own connections.
        if not can_run_as_nodes():
            self.skipTest("ranks cannot take hostnames of their own here (UTS namespaces need root)")
        with torchrun_job(4, ["--steps", "100"], self.dumps, faults="dead-link=2->0@op=20", per_node=2) as job:
            self.wait_for_dumps(job, 4)
            self.assert_dumped_with_torch_alive(job, 4)
            report = self.report()
        verdict = report["verdict"]
        self.assertEqual(verdict["kind"], "communication-hang", verdict)
        self.assertEqual(verdict["culprit_link"], {"from": 2, "to": 0}, verdict)
        self.assertTrue(verdict["confident"], verdict)
        self.assertIn("TREE channel(s)", "\n".join(verdict["evidence"]))

    def test_dead_nic_between_two_nodes_is_named_without_the_debugger(self):
        # Two nodes of two on the ring, the collector off: node-1's mlx5_2 (rank 2's NIC: one
        # torchrun, so GPU 2) stops, and with it the ring's 1 -> 2 between the nodes. NCCL's
        # profiler names the link, and NCCL's INFO lines at its connections' set-up, which the
        # watchdog had NCCL write node-local (the job left NCCL_DEBUG unset), name both NICs.
        # (On NCCL's own choice, the tree, the NIC stops both directions of the 0 <-> 2 edge:
        # the verdict hedges between the two, as two links hold steps on the wire.)
        if not can_run_as_nodes():
            self.skipTest("ranks cannot take hostnames of their own here (UTS namespaces need root)")
        with torchrun_job(4, ["--steps", "100"], self.dumps, faults="dead-nic=node-1:mlx5_2@op=20", per_node=2,
                          extra_env={"HANGWATCH_COLLECT": "0", "NCCL_ALGO": "Ring"}) as job:
            self.wait_for_dumps(job, 4)
            verdict = self.report()["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertEqual(verdict["kind"], "communication-hang", context)
        self.assertTrue(verdict["confident"], context)
        self.assertEqual(verdict["culprit_link"], {"from": 1, "to": 2}, context)
        nics = [(n["host"], n["device"], n["source"]) for n in verdict["culprit_link_nics"]]
        self.assertEqual(nics, [("node-0", "mlx5_1", "nccl-info"), ("node-1", "mlx5_2", "nccl-info")], context)

    def test_rank_stuck_in_python_is_named_with_its_python_frames(self):
        with torchrun_job(4, ["--steps", "100", "--stall-rank", "2", "--stall-at-step", "3"], self.dumps) as job:
            self.wait_for_dumps(job, 4)
            dumps = self.assert_dumped_with_torch_alive(job, 4)
            report = self.report()
        verdict = report["verdict"]
        self.assertEqual(verdict["kind"], "non-communication-hang", verdict)
        self.assertEqual(verdict["culprit_ranks"], [2], verdict)
        frames = main_thread_python_frames(dumps[2])
        self.assertEqual(frames[0]["function"], "stuck_in_host_loop", frames)
        self.assertIn("stuck_in_host_loop (", "\n".join(verdict["evidence"]))
        # The merged stack: train.py's frames above the interpreter's native ones.
        main = next(t for t in dumps[2]["threads"] if t["tid"] == dumps[2]["pid"])
        kinds = [f.get("kind") for f in main["frames"]]
        self.assertLess(kinds.index("python"), len(kinds) - 1 - kinds[::-1].index("native"), kinds)

    def test_gpu_that_stops_is_named(self):
        with torchrun_job(4, ["--steps", "100"], self.dumps, faults="dead-rank=2@op=20",
                          extra_env={"NCCL_ALGO": "Ring"}) as job:
            self.wait_for_dumps(job, 4)
            self.assert_dumped_with_torch_alive(job, 4)
            verdict = self.report()["verdict"]
        self.assertEqual(verdict["kind"], "communication-hang", verdict)
        self.assertEqual(verdict["culprit_ranks"], [2], verdict)
        self.assertIsNone(verdict["culprit_link"], verdict)

    def test_a_rank_killed_alone_on_its_node_is_named_from_nccls_ras(self):
        # Three nodes of one GPU, one torchrun agent each, IB, the collector off: rank 2's process
        # is SIGKILLed at step 8 and its agent ends only node 2's part. Over IB nothing is posted
        # to the dead peer, so NCCL never errors; the others wait in DDP's all-reduce and dump, and
        # only NCCL's RAS (asked by hangwatch from node 0) says rank 2 is gone.
        if not can_run_as_nodes():
            self.skipTest("jobs on several nodes need a UTS namespace per rank (root)")
        args = ["--steps", "100", "--exit-rank", "2", "--exit-at-step", "8", "--exit-how", "kill"]
        env = {"HANGWATCH_COLLECT": "0", "NCCL_NET": "IB", "NCCL_IB_TIMEOUT": "20"}
        with torchrun_nodes_job([1, 1, 1], args, self.dumps, extra_env=env) as job:
            self.wait_for_dumps(job, 3, ranks=(0, 1))
        verdict = self.report()["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertTrue(verdict["confident"], context)
        self.assertEqual(verdict["culprit_ranks"], [2], context)
        self.assertTrue(any("NCCL's RAS" in e for e in verdict["evidence"]), context)


class RealTorchrunRestarts(TorchCase):
    """The real torchrun with --max-restarts (issue 44): attempt 0 hangs on a dead link, is
    dumped and aborted (HANGWATCH_ON_HANG=abort), and torchrun restarts every worker with
    TORCHELASTIC_RESTART_COUNT=1 and the fault gone, as after a bad link is drained.

    torchrun's agent keeps one TCPStore for every attempt (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=0,
    the default since 2.5), and PyTorch's key for a communicator's ncclUniqueId is the same in
    each: a restarted worker that reads it before the new rank 0 writes it gets the last
    attempt's id, whose bootstrap root died with that attempt (pytorch#135712, #167288). NCCL
    retries the refused connect for about a minute, the other ranks wait in their init."""

    def restart_job(self, max_restarts, first_attempt, extra_env, timeout_s):
        env = {"LD_PRELOAD": str(build_dir() / "watchdog" / "libhangwatch.so"), "HANGWATCH_DUMP_DIR": str(self.dumps),
               "HANGWATCH_JOB_ID": JOB_ID, "HANGWATCH_TIMEOUT": str(timeout_s), "HANGWATCH_FORENSICS": forensics(),
               "HANGWATCH_ON_HANG": "abort", "NCCL_ALGO": "Ring", "SIMGPU_FAULTS": "", "OMP_NUM_THREADS": "1",
               "PYTHONWARNINGS": "ignore", **extra_env}
        launcher = [str(simgpu_run()), str(torch_venv() / "bin" / "torchrun"), "--standalone", "--nproc-per-node",
                    "2", "--max-restarts", str(max_restarts), "--no-python"]
        wrapper = ["/bin/sh", "-c", first_attempt + '; exec "$0" "$@"', str(torch_venv() / "bin" / "python"),
                   str(TRAIN), "--steps", "30"]
        return MpiJob(2, wrapper, env=env, program=PROGRAM, launcher=launcher)

    def attempt_report(self, attempt):
        out = run_forensics("report", self.job_dir, "--format", "json", "--attempt", attempt)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_attempt_0_hangs_and_is_aborted_attempt_1_runs_clean_and_nothing_of_0_is_lost(self):
        # Each attempt's own store, as an operator of a restarting job is told to set.
        dead_link_first = 'case "$TORCHELASTIC_RESTART_COUNT" in 0) export SIMGPU_FAULTS="dead-link=0->1@op=20";; esac'
        with self.restart_job(2, dead_link_first, {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}, 5) as job:
            code = job.wait_exit(300)
            out = job.output()
        self.assertEqual(code, 0, out[-4000:])
        self.assertIn("HANGWATCH_ON_HANG=abort", out)
        self.assertIn(f"{PROGRAM} summary ranks=2 steps=30", out)
        newest = self.report()
        self.assertEqual((newest["attempt"]["number"], newest["attempt"]["count"]), (2, 2), newest["attempt"])
        self.assertEqual(newest["attempt"]["restart"], 1)
        self.assertEqual(newest["verdict"]["kind"], "no-hang", json.dumps(newest["verdict"], indent=1))
        first = self.attempt_report("restart-0")
        self.assertEqual(first["ranks_missing"], [])
        self.assertEqual(first["verdict"]["culprit_link"], {"from": 0, "to": 1}, json.dumps(first["verdict"], indent=1))
        self.assertTrue(first["verdict"]["confident"], json.dumps(first["verdict"], indent=1))
        for rank in range(2):
            state = json.loads((Path(first["job_dir"]) / "ranks" / f"r{rank:05d}.state.json").read_text())
            self.assertEqual((state["state"], state["forensics"]), ("done", "written"), state)

    def test_a_restarted_worker_that_reads_the_last_attempts_unique_id_is_named(self):
        # torchrun's default shared store; attempt 1's rank 0 starts late, so rank 1 reads the id
        # attempt 0 left there, as a slow rank 0 makes it do on a real restart. HANGWATCH_TIMEOUT
        # fires while rank 1 still retries its connect (about a minute) and rank 0 waits in init.
        first_attempt = ('case "$TORCHELASTIC_RESTART_COUNT:$LOCAL_RANK" in '
                         '0:*) export SIMGPU_FAULTS="dead-link=0->1@op=20";; 1:0) sleep 4;; esac')
        with self.restart_job(1, first_attempt, {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"}, 15) as job:
            code = job.wait_exit(300)
            out = job.output()
        self.assertNotEqual(code, 0, out[-4000:])
        second = self.attempt_report("restart-1")
        verdict = json.dumps(second["verdict"], indent=1)
        self.assertEqual(second["ranks_missing"], [], verdict)
        self.assertEqual(second["verdict"]["kind"], "non-communication-hang", verdict)
        self.assertEqual(second["verdict"]["culprit_ranks"], [1], verdict)
        self.assertTrue(second["verdict"]["confident"], verdict)
        self.assertIn("no rank of this launch made that id", verdict)
        self.assertIn("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1", verdict)
        first = self.attempt_report("restart-0")
        self.assertEqual(first["verdict"]["culprit_link"], {"from": 0, "to": 1}, json.dumps(first["verdict"], indent=1))


class PyTorchsOwnTimeout(TorchCase):
    """PyTorch's watchdog declares the hang itself (init_process_group(timeout=5 s)). 2.15, at
    its timeout: with TORCH_NCCL_ASYNC_ERROR_HANDLING=1 it calls ncclCommAbort at once, and in
    both 1 and 3 it ends each rank with SIGABRT 15 s later (TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC;
    4 s here). hangwatch takes either as the
    hang's trigger and holds it until the rank's dumps are done (declared_hang.h), so they are
    complete however far HANGWATCH_TIMEOUT is, and also when an abort lands while the collector
    reads the rank (equal timeouts); then the job ends as PyTorch meant it to: a worker dead of
    SIGABRT, torchrun exiting 1."""

    def run_until_pytorch_ends_it(self, async_error_handling, hangwatch_timeout_s):
        env = {"NCCL_ALGO": "Ring", "TORCH_NCCL_ASYNC_ERROR_HANDLING": str(async_error_handling),
               "TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(Path(self.tmp.name) / "fr_rank_"),
               # PyTorch's wait between its timeout and its SIGABRT (15 s by default), shortened
               # to keep the test short; what it does at either end is unchanged.
               "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "4000"}
        with torchrun_job(2, ["--steps", "100", "--pg-timeout", "5"], self.dumps, faults="dead-link=0->1@op=20",
                          extra_env=env, timeout_s=hangwatch_timeout_s) as job:
            code = job.wait_exit(150)
            output = job.output()
        self.assertEqual(code, 1, f"torchrun's exit status:\n{output[-3000:]}")
        self.assertIn("(SIGABRT)", output, "a worker ends of PyTorch's SIGABRT, as without hangwatch")
        self.assertIn("Aborting process on rank", output, "PyTorch's own watchdog declared the hang")
        self.assertEqual(states(self.job_dir, 2), {0: "done", 1: "done"}, output[-3000:])
        # A rank says how long it held PyTorch's abort, and none held it past its bound. (Once the
        # first rank dies of its SIGABRT, torchrun SIGTERMs the other, which may end it, its
        # dumps done, before it says so.)
        held = [(int(r), how, int(ms)) for r, how, ms in re.findall(
            r"hangwatch\[rank (\d+)\]: (SIGABRT|ncclCommAbort) held (\d+) ms until this rank's dumps were done", output)]
        self.assertTrue(held and {r for r, _, _ in held} <= {0, 1}, output[-3000:])
        self.assertNotIn("its bound, and went on", output)
        self.assertTrue(all(ms <= 95_000 for _, _, ms in held), held)
        print(f"abort held (ms): {held}")
        for rank, dump in self.dumps_of(2).items():
            state = json.loads((self.job_dir / "ranks" / f"r{rank:05d}.state.json").read_text())
            self.assertEqual(state["forensics"], "written", f"rank {rank}: {state}")
            self.assertTrue(dump["threads"] and dump["ring_progress"], f"rank {rank}: stacks and ring progress")
            # An abort that had cut the collector short says so here.
            self.assertFalse(dump.get("target_exited_during"), f"rank {rank}: {dump.get('target_exited_during')}")
        verdict = self.report()["verdict"]
        self.assertEqual(verdict["kind"], "communication-hang", verdict)
        self.assertEqual(verdict["culprit_link"], {"from": 0, "to": 1}, verdict)
        self.assertTrue(verdict["confident"], verdict)
        return json.loads((self.job_dir / "TRIGGER.json").read_text())["reason"], verdict

    def assert_flight_recorder_evidence(self, verdict):
        # PyTorch wrote its Flight Recorder at its timeout, before the abort: the collector kept
        # each rank's, and the report names the default group's pending all-reduce from them.
        for rank in (0, 1):
            self.assertTrue((self.job_dir / "ranks" / f"r{rank:05d}.flight_recorder.pkl").exists(), rank)
        said = [e for e in verdict["evidence"] if e.startswith("PyTorch's Flight Recorder: ")]
        self.assertEqual(len(said), 1, verdict["evidence"])
        self.assertIn("on rank(s) 0,1", said[0])
        self.assertIn("all_reduce", said[0])
        self.assertIn("'default_pg', ranks [0, 1]", said[0])

    def test_sigabrt_mode_3_with_hangwatchs_timeout_far_away(self):
        reason, verdict = self.run_until_pytorch_ends_it(3, 300)
        self.assertEqual(reason, "framework-signal")
        self.assertTrue(any("SIGABRT, as PyTorch's watchdog does" in e for e in verdict["evidence"]), verdict)
        self.assert_flight_recorder_evidence(verdict)

    def test_ncclcommabort_mode_1_with_hangwatchs_timeout_far_away(self):
        reason, verdict = self.run_until_pytorch_ends_it(1, 300)
        self.assertEqual(reason, "framework-abort")
        self.assertTrue(any("aborted the communicator (ncclCommAbort)" in e for e in verdict["evidence"]), verdict)
        self.assert_flight_recorder_evidence(verdict)

    def test_sigabrt_mode_3_with_equal_timeouts(self):
        reason, _ = self.run_until_pytorch_ends_it(3, 5)
        self.assertEqual(reason, "timeout")  # hangwatch's, 4 s before PyTorch's SIGABRT

    def test_ncclcommabort_mode_1_with_equal_timeouts_lands_mid_collection(self):
        # Both run out within a poll: whichever comes first dumps, and an abort that lands while
        # the collector reads the rank waits for it.
        reason, _ = self.run_until_pytorch_ends_it(1, 5)
        self.assertIn(reason, ("timeout", "framework-abort"))


if __name__ == "__main__":
    unittest.main()


PIPELINE_TRAIN = SOURCE_DIR / "examples" / "torch_pipeline" / "train.py"


class TorchPipeline(TorchCase):
    """PyTorch's own pipeline schedules (torch.distributed.pipelining: PipelineStage,
    Schedule1F1B, batched isend/irecv), 4 stages, one per process, under the real torchrun."""

    def test_a_stage_stuck_in_python_after_a_slower_stage_is_named_with_both(self):
        # Stage 3's forwards get heavier from step 8 on; at step 16 stage 2 loops in Python. The GPU
        # is slowed (SIMGPU_TFLOPS) so that GEMMs, not simgpu's host-side transfers, take the step.
        args = ["--steps", "40", "--slow-rank", "3", "--slow-from-step", "8", "--slow-matmuls", "32",
                "--stall-rank", "2", "--stall-at-step", "16"]
        env = {"SIMGPU_TFLOPS": "0.002", "HANGWATCH_METRICS_INTERVAL": "1"}
        with torchrun_job(4, args, self.dumps, extra_env=env, script=PIPELINE_TRAIN) as job:
            self.wait_for_dumps(job, 4)
            self.assertIsNone(job.proc.poll(), "torchrun ended while the job was hung")
            verdict = self.report()["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertEqual(verdict["kind"], "non-communication-hang", context)
        self.assertEqual(verdict["culprit_ranks"], [2], context)
        place = next(p for p in verdict["pipeline_places"] if p["rank"] == 2)
        self.assertEqual((place["stage"], place["stages"]), (2, 4), context)
        frames = [f for w in verdict["where"] if w["rank"] == 2 for f in w["frames"]]
        self.assertTrue(any("stuck_in_host_loop" in f for f in frames), context)
        before = [e for e in verdict["evidence"] if e.startswith("Before the hang the job slowed down")]
        self.assertEqual(len(before), 1, context)
        self.assertIn("rank 3 of pipeline stage 3", before[0], context)

    def test_the_last_stage_killed_alone_on_its_node_is_named(self):
        # Nodes {0,1,2} and {3}, one torchrun agent each, as a two-node job runs; IB, collector off.
        # Stage 3 is SIGKILLed (the OOM killer) at step 6, alone on its node: nobody there says so,
        # and its agent ends only its own node's part. Node 0's agent sees its workers alive, so
        # stages 0-2 wait on stage 3 and dump. Rank 3 is named: NCCL's RAS, asked from node 0,
        # lists it missing on the communicator the stages' sends run on.
        if not can_run_as_nodes():
            self.skipTest("jobs on several nodes need a UTS namespace per rank (root)")
        args = ["--steps", "40", "--exit-rank", "3", "--exit-at-step", "6"]
        env = {"HANGWATCH_COLLECT": "0", "NCCL_NET": "IB", "NCCL_IB_TIMEOUT": "20"}
        with torchrun_nodes_job([3, 1], args, self.dumps, extra_env=env, script=PIPELINE_TRAIN) as job:
            self.wait_for_dumps(job, 4, ranks=(0, 1, 2))
            out = job.output()
        self.assertIn("rank=3 killed at step 6", out)
        verdict = self.report()["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertTrue(verdict["confident"], context)
        self.assertEqual(verdict["culprit_ranks"], [3], context)
        self.assertTrue(any("NCCL's RAS" in e for e in verdict["evidence"]), context)
