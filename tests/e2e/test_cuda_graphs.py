"""CUDA graphs under the watchdog (issue 13): a training loop that warms up eagerly,
captures its gradient AllReduce into a graph once and replays it every step runs to the
end with correct sums and no TRIGGER.json; a link that dies during a replay is detected
and the report names it."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from e2e_case import E2ECase
from harness import MpiJob, ring_train_binary
from test_analyze import forensics_binary, hangwatch_lib


class CudaGraphCase(E2ECase):
    def setUp(self):
        for path in (hangwatch_lib(), forensics_binary()):
            if not Path(path).exists():
                self.skipTest(f"{path} is not built")
        self.dump_root = tempfile.mkdtemp(prefix="hangwatch-graphs-")
        self.addCleanup(shutil.rmtree, self.dump_root, True)

    def env(self, job_id, **extra):
        return {"LD_PRELOAD": hangwatch_lib(), "HANGWATCH_DUMP_DIR": self.dump_root, "HANGWATCH_JOB_ID": job_id,
                "HANGWATCH_FORENSICS": forensics_binary(), **extra}


class ReplayedAllReduce(CudaGraphCase):
    def test_replays_give_correct_sums_and_no_false_hang(self):
        argv = [ring_train_binary(), "--steps", "40", "--log-every", "40", "--cuda-graph", "--grad-mb", "1"]
        env = self.env("healthy", HANGWATCH_TIMEOUT="2", HANGWATCH_COLLECT="0", HANGWATCH_METRICS_INTERVAL="1")
        with MpiJob(4, argv, env=env) as job:
            self.assert_completes(job, 120)  # every rank checks every step's sums
        job_dir = Path(self.dump_root) / "healthy"
        self.assertFalse((job_dir / "TRIGGER.json").exists())
        # Each replay was timed as one operation naming its collective.
        windows = [json.loads(l) for f in (job_dir / "metrics").glob("*.jsonl") for l in f.read_text().splitlines()]
        replays = sum(op["cnt"] for w in windows for op in w.get("ops", []) if op["c"] == "graph")
        eager = sum(op["cnt"] for w in windows for op in w.get("ops", []) if op["c"] == "coll")
        self.assertEqual(replays, 4 * 38, "two warm-up steps, then one replay per step on each of 4 ranks")
        self.assertEqual(eager, 4 * 2)


class LinkDiesDuringReplay(CudaGraphCase):
    def test_the_report_names_the_link(self):
        # op 10 is a replay: steps 0 and 1 are eager, the capture takes no op.
        argv = [ring_train_binary(), "--steps", "40", "--cuda-graph", "--grad-mb", "1"]
        env = self.env("dead", SIMGPU_FAULTS="dead-link=1->2@op=10", HANGWATCH_TIMEOUT="3")
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
        self.assertEqual(verdict["culprit_link"], {"from": 1, "to": 2}, verdict)
        self.assertIn("cudaGraphLaunch", json.dumps(verdict["op"]))
