"""One process driving several devices (examples/device_ring), as NCCL's single-process
examples do (issue 15): every correct program shape runs to success under the watchdog
with no trigger, and a ring exchange with one link killed is detected with a log line
that names the device and the communicator rank, and the report names the link."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from harness import MpiJob, ring_train_binary


def build_dir():
    return Path(ring_train_binary()).resolve().parents[2]


def device_ring():
    return os.environ.get("DEVICE_RING", str(build_dir() / "examples" / "device_ring" / "device_ring"))


def hangwatch_lib():
    return os.environ.get("HANGWATCH_LIB", str(build_dir() / "watchdog" / "libhangwatch.so"))


def forensics_binary():
    return os.environ.get("FORENSICS", str(build_dir() / "forensics" / "forensics"))


class DeviceRingCase(unittest.TestCase):
    def setUp(self):
        for path in (device_ring(), hangwatch_lib()):
            if not Path(path).exists():
                self.skipTest(f"{path} is not built")
        self.dump_root = tempfile.mkdtemp(prefix="hangwatch-device-ring-")
        self.addCleanup(shutil.rmtree, self.dump_root, True)

    def env(self, job_id, **extra):
        env = dict(os.environ, LD_PRELOAD=hangwatch_lib(), HANGWATCH_DUMP_DIR=self.dump_root,
                   HANGWATCH_JOB_ID=job_id, HANGWATCH_TIMEOUT="2", HANGWATCH_METRICS_INTERVAL="1", **extra)
        for launcher in ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"):
            env.pop(launcher, None)
        return env


class CorrectShapes(DeviceRingCase):
    SHAPES = {
        "one-group": [],
        "stream0": ["--stream0"],
        "thread-per-device": ["--threads"],
        "thread-per-device-stream0": ["--threads", "--stream0"],
        "registered": ["--register"],
        "windows": ["--window", "--threads"],
    }

    def test_every_shape_completes_under_the_watchdog_without_a_trigger(self):
        for name, args in self.SHAPES.items():
            with self.subTest(shape=name):
                r = subprocess.run([device_ring(), "--steps", "30", "--log-every", "30", *args],
                                   env=self.env(name, HANGWATCH_COLLECT="0"), capture_output=True, text=True,
                                   timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("device_ring OK", r.stdout)
                job_dir = Path(self.dump_root) / name
                self.assertFalse((job_dir / "TRIGGER.json").exists(), r.stderr)
                # The watchdog saw the p2p traffic of all four devices.
                windows = [json.loads(l) for f in (job_dir / "metrics").glob("*.jsonl") for l in f.read_text().splitlines()]
                sends = sum(op["cnt"] for w in windows for op in w.get("ops", []) if op["n"] == "ncclSend")
                self.assertEqual(sends, 30 * 4, f"{name}: {sends} ncclSend timed")


class BeforeItsRankIsKnown(DeviceRingCase):
    def test_gpu_work_done_before_the_first_communicator_is_kept(self):
        # No launcher: the process learns its rank from ncclCommInitAll. What its GPU did
        # before (loading a model) is still in its metrics, not dropped.
        def memcpys(job_id, warmup):
            r = subprocess.run([device_ring(), "--steps", "3", "--warmup", str(warmup), "--devices", "2"],
                               env=self.env(job_id, HANGWATCH_COLLECT="0"), capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            job_dir = Path(self.dump_root) / job_id
            windows = [json.loads(l) for f in (job_dir / "metrics").glob("*.jsonl") for l in f.read_text().splitlines()]
            self.assertTrue(windows, r.stderr)
            # Its device is in every window (the watchdog learned it from the copies).
            self.assertEqual({w.get("dev") for w in windows}, {0}, windows[0])
            return sum(op["cnt"] for w in windows for op in w.get("ops", []) if op["c"] == "memcpy")

        self.assertEqual(memcpys("warm", 25) - memcpys("cold", 0), 25)


class DeadLink(DeviceRingCase):
    def test_a_dead_link_is_detected_and_the_log_names_the_device_and_rank(self):
        # Each device its own node, so its links are network links that report proxy steps
        # (inside a node NCCL, and simnccl, report none and the profiler could not name the link).
        env = self.env("dead", SIMGPU_FAULTS="dead-link=1->2@op=0", HANGWATCH_COLLECT="0",
                       SIMGPU_RANKS_PER_NODE="1")
        proc = subprocess.Popen([device_ring(), "--steps", "30"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        job_dir = Path(self.dump_root) / "dead"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not list((job_dir / "ranks").glob("*.watchdog.json")):
                time.sleep(0.5)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        snapshots = list((job_dir / "ranks").glob("*.watchdog.json"))
        self.assertEqual(len(snapshots), 1, err)
        # Device 2 is the one whose receive never arrives; its stream is stuck at the group's first op.
        self.assertRegex(err, rf"hangwatch\[pid {proc.pid}\]: hang: nccl(Send|Recv) on device 2 ")
        self.assertIn(", rank 2)", err)
        snap = json.loads(snapshots[0].read_text())
        # Every device's communicator with its own rank, and the stuck stream's device.
        self.assertEqual(sorted((c["rank"], c["device"]) for c in snap["comms"]), [(d, d) for d in range(4)])
        self.assertIn(2, [s.get("device") for s in snap["streams"]])
        # The report names the link, in communicator ranks, from NCCL's profiler events.
        r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", "json", "--wait", "0"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        verdict = json.loads(r.stdout)["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertEqual(verdict["kind"], "communication-hang", context)
        self.assertEqual(verdict["culprit_link"], {"from": 1, "to": 2}, context)
        # The report's ranks are the GPUs' (DESIGN.md §3): the link's ends, each on the process.
        report = json.loads(r.stdout)
        self.assertEqual((report["ranks_are"], report["world_size"], report["processes"]), ("gpu", 4, 1), context)
        self.assertEqual([(g["rank"], g["gpu"], g["process"]) for g in report["gpu_ranks"]],
                         [(d, d, 0) for d in range(4)])
        self.assertEqual(verdict["culprit_ranks"], [1, 2], context)
        self.assertRegex(verdict["headline"], r"rank 1 \(host \S+, GPU 1, pid \d+, process 0\)")
        self.assertEqual(verdict["pipeline_places"], [], context)  # a ring exchange is no pipeline


class SeveralProcessesOfSeveralDevices(DeviceRingCase):
    """Issue 43: 2 processes under mpirun, each driving 2 devices with a thread each (as
    nccl-tests all_reduce_perf -t 2), one 4-rank communicator. Report ranks of the hung
    collective are communicator ranks, each placed on its process and GPU; no communicator
    rank is taken for a launcher rank that did not dump."""

    def job(self, job_id, faults, steps):
        env = self.env(job_id, HANGWATCH_COLLECT="1", HANGWATCH_FORENSICS=forensics_binary(),
                       HANGWATCH_ON_HANG="abort", NCCL_ALGO="Ring", SIMGPU_FAULTS=faults)
        argv = [device_ring(), "--devices", "2", "--threads", "--allreduce", "--steps", str(steps), "--log-every",
                str(steps), "--id-file", str(Path(self.dump_root) / f"{job_id}.id")]
        with MpiJob(2, argv, env=env, program="device_ring") as job:
            code = job.wait_exit(120)
            out = job.output()
        self.assertIsNotNone(code, out[-3000:])
        return code, out, Path(self.dump_root) / job_id

    def test_healthy_then_a_dead_link_named_in_communicator_ranks_with_each_gpu(self):
        code, out, job_dir = self.job("healthy", "", 20)
        self.assertEqual(code, 0, out[-3000:])
        self.assertEqual(out.count("device_ring OK"), 2, out[-3000:])
        self.assertFalse((job_dir / "TRIGGER.json").exists(), out[-3000:])

        code, out, job_dir = self.job("dead", "dead-link=3->0@op=2", 10)
        self.assertNotEqual(code, 0, out[-3000:])  # abort mode
        r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", "json", "--wait", "0"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        verdict = report["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertEqual(verdict["kind"], "communication-hang", context)
        self.assertTrue(verdict["confident"], context)
        self.assertEqual(verdict["culprit_link"], {"from": 3, "to": 0}, context)
        self.assertEqual(verdict["culprit_ranks"], [0, 3], context)
        self.assertEqual(report["ranks_missing"], [], context)
        self.assertNotIn("did not dump", json.dumps(report["verdict"]))
        # The report's ranks are GPU ranks, world size the communicator's; each process's launcher
        # rank beside its GPUs: communicator rank 3 is process 1's second device, 0 process 0's first.
        self.assertEqual((report["ranks_are"], report["world_size"], report["processes"]), ("gpu", 4, 2), context)
        self.assertEqual([(g["rank"], g["gpu"], g["process"]) for g in report["gpu_ranks"]],
                         [(0, 0, 0), (1, 1, 0), (2, 2, 1), (3, 3, 1)])
        self.assertEqual(report["ranks_answered"], 4)
        self.assertRegex(verdict["headline"], r"rank 3 \(GPU 3 on host \S+\) to rank 0 \(GPU 0 on host")
        self.assertTrue(any("Test the link GPU 3 on host" in s for s in verdict["next_steps"]), verdict["next_steps"])
        # Each process's debugger read both of its communicator ranks' channels.
        for process, ranks in ((0, {0, 1}), (1, {2, 3})):
            dump = json.loads((job_dir / "ranks" / f"r{process:05d}.forensics.json").read_text())
            self.assertEqual({rp["comm_rank"] for rp in dump["ring_progress"]}, ranks, process)

        # A GPU that stops is named as the GPU rank it is, on its process: never "no dump".
        code, out, job_dir = self.job("dead-gpu", "dead-rank=3@op=2", 10)
        self.assertNotEqual(code, 0, out[-3000:])
        r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", "json", "--wait", "0"],
                           capture_output=True, text=True, timeout=120)
        report = json.loads(r.stdout)
        verdict = report["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertEqual(verdict["kind"], "communication-hang", context)
        self.assertEqual(verdict["culprit_ranks"], [3], context)
        self.assertIn("GPU 3", verdict["headline"])
        self.assertEqual(verdict["lacking_data"], [], context)
        self.assertNotIn("no dump", json.dumps(verdict))
