"""Non-blocking NCCL communicators under the watchdog (issue 13): every call answers
ncclInProgress and NCCL's own thread launches the kernel later. The watchdog times the
kernel that is really launched (its end event goes in once the program sees the
communicator ready), writes no TRIGGER.json for a healthy job, and a dead link is
detected and named in the report."""
import json
import subprocess
import time
from pathlib import Path

from harness import MpiJob, ring_train_binary
from test_analyze import forensics_binary
from test_cuda_graphs import CudaGraphCase


class HealthyNonBlocking(CudaGraphCase):
    def test_every_collective_is_timed_and_nothing_triggers(self):
        argv = [ring_train_binary(), "--steps", "30", "--log-every", "30", "--nonblocking", "--grad-mb", "1"]
        env = self.env("healthy", HANGWATCH_TIMEOUT="2", HANGWATCH_COLLECT="0", HANGWATCH_METRICS_INTERVAL="1")
        with MpiJob(4, argv, env=env) as job:
            self.assert_completes(job, 120)
        job_dir = Path(self.dump_root) / "healthy"
        self.assertFalse((job_dir / "TRIGGER.json").exists())
        windows = [json.loads(l) for f in (job_dir / "metrics").glob("*.jsonl") for l in f.read_text().splitlines()]
        timed = [op for w in windows for op in w.get("ops", []) if op["c"] == "coll" and op["n"] == "ncclAllReduce"]
        self.assertEqual(sum(op["cnt"] for op in timed), 4 * 30)
        self.assertTrue(all(op.get("bus", 0) > 0 for op in timed), timed)


class DeadLinkNonBlocking(CudaGraphCase):
    def test_the_report_names_the_link(self):
        argv = [ring_train_binary(), "--steps", "40", "--nonblocking", "--grad-mb", "1"]
        env = self.env("dead", SIMGPU_FAULTS="dead-link=2->3@op=6", HANGWATCH_TIMEOUT="3")
        job_dir = Path(self.dump_root) / "dead"
        with MpiJob(4, argv, env=env) as job:
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline and len(list((job_dir / "ranks").glob("r*.forensics.json"))) < 4:
                time.sleep(1)
            self.assertEqual(len(list((job_dir / "ranks").glob("r*.forensics.json"))), 4, job.output()[-3000:])
        r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", "json"], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        verdict = json.loads(r.stdout)["verdict"]
        self.assertEqual(verdict["kind"], "communication-hang", verdict)
        self.assertEqual(verdict["culprit_link"], {"from": 2, "to": 3}, verdict)
