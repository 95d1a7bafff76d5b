"""Abort mode under real and test launchers (issue #18): mpirun kills every rank once one
exits, a torchrun-like launcher and an srun-like one SIGTERM every worker when one fails and
SIGKILL them after a grace. Every rank's dumps must be complete when the launcher returns,
and `forensics report`, run at once, must name the right culprit."""
import json
import os
import re
import signal
import shutil
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from e2e_case import E2ECase
from harness import MpiJob, torchrun_like


class LauncherCase(E2ECase):
    def setUp(self):
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                self.skipTest(f"{binary} is not built")
        self.root = tempfile.mkdtemp(prefix="hangwatch-launchers-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def skip_without_ptrace(self, job_dir):
        logs = "\n".join(p.read_text(errors="replace") for p in (Path(job_dir) / "ranks").glob("*.collect.log"))
        if "Operation not permitted" in logs:
            self.skipTest("ptrace not permitted here: the collector cannot take stacks")

    def assert_every_rank_complete(self, job_dir, nranks, out, ring=True):
        ranks = Path(job_dir) / "ranks"
        for r in range(nranks):
            context = f"rank {r}\n{out[-3000:]}"
            snapshot = json.loads((ranks / f"r{r:05d}.watchdog.json").read_text())
            self.assertEqual(snapshot["identity"]["rank"], r, context)
            state = json.loads((ranks / f"r{r:05d}.state.json").read_text())
            self.assertEqual(state["state"], "done", context)
            dump = json.loads((ranks / f"r{r:05d}.forensics.json").read_text())
            self.assertIsNone(dump.get("target_exited_during"), f"{dump['errors']}\n{context}")
            self.assertTrue(dump["threads"], context)
            if ring:
                self.assertTrue(dump["ring_progress"], f"{dump['errors']}\n{context}")

    def report_now(self, job_dir):
        rep = report_jobs.report_json(job_dir)
        self.assertEqual(rep["ranks_collecting"], [])
        self.assertEqual(rep["ranks_missing"], [])
        self.assertTrue(rep["verdict"]["confident"], json.dumps(rep["verdict"], indent=1))
        return rep["verdict"]


class MpirunKillOnExit(LauncherCase):
    def test_mpirun_kills_the_job_only_after_every_rank_is_done(self):
        job_dir, out, code = report_jobs.run_hung_job("dead-link-8", self.root)
        self.skip_without_ptrace(job_dir)
        self.assertIsNotNone(code, out[-3000:])
        self.assertNotEqual(code, 0)
        beacon = (job_dir / "TRIGGER.beacon").read_text()
        self.assertIn("complete ranks_done=8 ranks_given_up=0", beacon)
        self.assert_every_rank_complete(job_dir, 8, out)
        v = self.report_now(job_dir)
        self.assertEqual(v["culprit_link"], {"from": 5, "to": 6}, json.dumps(v, indent=1))


class TorchrunLikeLauncher(LauncherCase):
    def test_dead_rank_on_six_ranks_under_a_torchrun_like_launcher(self):
        job_dir, out, code = report_jobs.run_hung_job("dead-rank-6", self.root, launcher="torchrun")
        self.skip_without_ptrace(job_dir)
        self.assertEqual(job_dir.name, "e2e-torchrun", "the job id comes from TORCHELASTIC_RUN_ID")
        self.assertEqual(code, 1, out[-3000:])
        # Exit 3 from the watchdog, or the program's own error exit once its aborted NCCL call returned.
        self.assertRegex(out, r"worker rank \d+ exited with [1-9]\d*: stopping the others")
        self.assert_every_rank_complete(job_dir, 6, out)
        v = self.report_now(job_dir)
        self.assertEqual(v["kind"], "communication-hang", json.dumps(v, indent=1))
        self.assertEqual(v["culprit_ranks"], [3])

    def test_sigterm_from_the_launcher_while_dumping_loses_nothing(self):
        # Wait mode: the job stays hung after dumping; the launcher is told to stop while the
        # collectors run, SIGTERMs every worker and SIGKILLs after its grace.
        nranks, program, args, faults = report_jobs.SCENARIOS["dead-link"]
        env = report_jobs.watchdog_env(self.root, faults=faults)
        job_dir = Path(self.root) / report_jobs.JOB_ID
        ranks = job_dir / "ranks"
        with MpiJob(nranks, report_jobs.job_argv(program, args, 50), env=env, program=program,
                    launcher=torchrun_like(nranks, kill_grace=60)) as job:
            def collecting():
                states = []
                for r in range(nranks):
                    try:
                        states.append(json.loads((ranks / f"r{r:05d}.state.json").read_text()))
                    except (OSError, ValueError):
                        return False
                return all(s["state"] == "done" or s["collector_pid"] > 0 for s in states)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not collecting() and job.proc.poll() is None:
                time.sleep(0.1)
            self.skip_without_ptrace(job_dir)
            self.assertTrue(collecting(), f"the collectors never started\n{job.output()[-3000:]}")
            job.proc.send_signal(signal.SIGTERM)
            code = job.wait_exit(120)
            out = job.output()
        self.assertIsNotNone(code, out[-3000:])
        self.assertIn("got SIGTERM: stopping the workers", out)
        self.assertNotIn("SIGKILL", out, "a worker outlived the launcher's grace")
        self.assertIn("SIGTERM held back while dumping; passing it on now", out)
        for r in range(nranks):
            self.assertIn(f"worker rank {r} killed by SIGTERM", out)
        self.assert_every_rank_complete(job_dir, nranks, out)
        v = self.report_now(job_dir)
        self.assertEqual(v["culprit_link"], {"from": 1, "to": 2}, json.dumps(v, indent=1))


class SrunLikeLauncher(LauncherCase):
    def test_rank_stuck_in_host_code_under_an_srun_like_launcher(self):
        job_dir, out, code = report_jobs.run_hung_job("host-loop-6", self.root, launcher="srun")
        self.skip_without_ptrace(job_dir)
        self.assertEqual(job_dir.name, "4242", "the job id comes from SLURM_JOB_ID")
        self.assertIsNotNone(code, out[-3000:])
        self.assertNotEqual(code, 0, out[-3000:])
        # The launcher ends the step at the first bad exit. In abort mode every task exits
        # on its own once the dumps are done, and all of them may be gone within one of the
        # launcher's polls: then there is nobody left to terminate, and each exit is bad.
        if not re.search(r"task \d+ exited with [1-9]\d*: terminating", out):
            bad_exits = re.findall(r"^fake_srun: task \d+ exited with [1-9]\d*$", out, re.M)
            self.assertEqual(len(bad_exits), 6, out[-3000:])
        snapshot = json.loads((job_dir / "ranks" / "r00004.watchdog.json").read_text())
        self.assertEqual(snapshot["identity"]["rank_source"], "SLURM_PROCID")
        self.assert_every_rank_complete(job_dir, 6, out, ring=False)
        v = self.report_now(job_dir)
        self.assertEqual(v["kind"], "non-communication-hang", json.dumps(v, indent=1))
        self.assertEqual(v["culprit_ranks"], [4])
        frames = [f for w in v["where"] if w["rank"] == 4 for f in w["frames"]]
        self.assertTrue(any("stall_in_host_loop" in f for f in frames), json.dumps(v, indent=1))


if __name__ == "__main__":
    unittest.main()
