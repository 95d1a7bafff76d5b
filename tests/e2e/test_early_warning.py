"""The early warning (issue #26, HANGWATCH_WARN_AFTER): a stall is named within seconds from the
ranks' snapshots alone (no debugger, no pause, no abort) while the job runs on; the hard timeout
still makes the full dumps, once. Jobs that are slow but never stall raise no warning."""
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from e2e_case import E2ECase
from harness import MpiJob

JOB = report_jobs.JOB_ID
AS_NODE = report_jobs.AS_NODE


class EarlyWarningCase(E2ECase):
    def setUp(self):
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                self.skipTest(f"{binary} is not built")
        self.root = tempfile.mkdtemp(prefix="hangwatch-warn-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.job_dir = Path(self.root) / JOB

    def env(self, faults="", timeout_s=120, warn_after_s=5, extra=None):
        env = report_jobs.watchdog_env(self.root, timeout_s=timeout_s, faults=faults)
        env["HANGWATCH_WARN_AFTER"] = str(warn_after_s)
        env.update(extra or {})
        return env

    def report(self):
        code, out, err = report_jobs.report(self.job_dir, "json", ("--wait", "0", "--no-save"))
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def suspect_snapshots(self):
        return {int(p.name[1:6]): json.loads(p.read_text()) for p in (self.job_dir / "ranks").glob("r*.suspect.json")}


class DeadInterNodeLink(EarlyWarningCase):
    def test_named_within_seconds_as_suspected_then_the_hard_timeout_dumps_once(self):
        if not report_jobs.can_run_as_nodes():
            self.skipTest("ranks cannot take hostnames of their own here (UTS namespaces need root)")
        # The ring's link between the nodes (NCCL's cost model would take the tree on two nodes).
        env = self.env("dead-link=3->4@op=8", timeout_s=30, extra={"NCCL_ALGO": "Ring"})
        env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
        argv = [sys.executable, str(AS_NODE), "4", "--", *report_jobs.job_argv("ring_train", [], 40)]
        suspect = self.job_dir / "SUSPECT.json"
        with MpiJob(8, argv, env=env) as job:
            stalled = job.wait_for(lambda _: all(s >= 7 for s in job.steps_done().values()), 120)
            self.assertTrue(stalled, job.output()[-3000:])
            stall_start = time.monotonic()  # every rank finished step 7: op 8 is the next collective
            warned = job.wait_for(lambda _: suspect.exists(), 30)
            warned_after = time.monotonic() - stall_start
            self.assertTrue(warned, job.output()[-3000:])
            self.assertLessEqual(warned_after, 5 + 2, f"SUSPECT.json after {warned_after:.1f} s")
            # The job runs on: nothing paused, nothing aborted, no collector.
            time.sleep(1)
            self.assertIsNone(job.proc.poll(), job.output()[-3000:])
            self.assertFalse((self.job_dir / "TRIGGER.json").exists())
            self.assertEqual(list((self.job_dir / "ranks").glob("*.forensics.json")), [])
            self.assertEqual(list((self.job_dir / "ranks").glob("*.collect.log")), [])
            self.assertEqual(sorted(self.suspect_snapshots()), list(range(8)))
            rep = self.report()
            self.assertEqual(rep["stage"], "suspected")
            v = rep["verdict"]
            self.assertEqual(v["kind"], "communication-hang", json.dumps(v, indent=1))
            self.assertTrue(v["confident"], json.dumps(v, indent=1))
            self.assertEqual(v["culprit_link"], {"from": 3, "to": 4})
            # Later the hard timeout does what it always did, once.
            dumped = job.wait_for(lambda _: report_jobs.dumps_complete(self.job_dir, 8), 240)
            self.assertTrue(dumped, job.output()[-3000:])
            beacon = (self.job_dir / "TRIGGER.beacon").read_text()
            self.assertEqual(beacon.count("triggered"), 1, beacon)
            self.assertEqual(beacon.count("suspected"), 1, beacon)
            self.assertEqual(len(list((self.job_dir / "ranks").glob("*.collect.log"))), 8)
        self.assertEqual(self.report()["stage"], "hang")


class NoFalseWarnings(EarlyWarningCase):
    """Slow, paused or idle jobs whose GPU work never stops moving for HANGWATCH_WARN_AFTER."""

    def run_clean(self, args, steps, faults="", extra=None, nranks=4):
        argv = report_jobs.job_argv("ring_train", args, steps)
        with MpiJob(nranks, argv, env=self.env(faults, timeout_s=60, extra=extra)) as job:
            code = job.wait_exit(180)
            out = job.output()
        self.assertEqual(code, 0, out[-3000:])
        self.assertFalse((self.job_dir / "SUSPECT.json").exists(), out[-3000:])
        self.assertNotIn("early warning", out)

    def test_healthy_job(self):
        self.run_clean([], 40)

    def test_slow_link_at_fifteen_percent(self):
        self.run_clean([], 30, faults="slow-link=1->2:0.15")

    def test_a_rank_with_two_second_gc_pauses(self):
        self.run_clean(["--gc-pause-ms", "2000", "--gc-rank", "1", "--gc-every", "10"], 30)

    def test_cuda_graph_replays(self):
        self.run_clean(["--cuda-graph"], 30)

    def test_non_blocking_communicators(self):
        self.run_clean(["--nonblocking"], 30)

    def test_every_rank_idle_on_the_host_as_in_a_checkpoint(self):
        # 8 s on the host with nothing in flight on the GPU, on every rank at once.
        self.run_clean(["--gc-pause-ms", "8000", "--gc-every", "6"], 8)


class HostStallThatResumes(EarlyWarningCase):
    def test_eight_seconds_in_host_code_warns_and_is_recorded_as_resumed(self):
        argv = report_jobs.job_argv("ring_train", ["--gc-pause-ms", "8000", "--gc-rank", "2", "--gc-every", "6"], 9)
        with MpiJob(4, argv, env=self.env(timeout_s=60)) as job:
            code = job.wait_exit(120)
            out = job.output()
        self.assertEqual(code, 0, out[-3000:])
        self.assertTrue((self.job_dir / "SUSPECT.json").exists(), out[-3000:])
        self.assertFalse((self.job_dir / "TRIGGER.json").exists())
        snaps = self.suspect_snapshots()
        self.assertEqual(sorted(snaps), [0, 1, 2, 3], out[-3000:])
        for rank, snap in snaps.items():
            resumed = snap["suspect"].get("resumed_after_s")
            self.assertIsNotNone(resumed, f"rank {rank} never recorded that it moved again\n{out[-2000:]}")
            self.assertLess(resumed, 8, f"rank {rank}")
        rep = self.report()
        self.assertEqual(rep["stage"], "suspected")
        self.assertEqual(rep["suspect"]["resumed_ranks"], [0, 1, 2, 3])
        # Who held the others up, from the snapshots at the warning: rank 2, outside the collective.
        self.assertEqual(rep["verdict"]["culprit_ranks"], [2], json.dumps(rep["verdict"], indent=1))


if __name__ == "__main__":
    unittest.main()
