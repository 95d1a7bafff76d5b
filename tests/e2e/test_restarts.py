"""Restarted jobs (issue #31): launchers restart a hung job under the same id (torchrun's
restarts, Slurm's requeues, a re-run under the same HANGWATCH_JOB_ID). A launch is never
triggered by an earlier one's hang, and each launch ("attempt") keeps its own dumps and gets
its own verdict: the first in the job folder, later ones in <job>/attempts/<name>/."""
import json
import os
import shutil
import signal
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from e2e_case import E2ECase
from harness import MpiJob, torchrun_like

JOB = report_jobs.JOB_ID


def attempts_of(job_dir):
    """Every attempt folder of a job that has its ATTEMPT.json, oldest first."""
    extra = Path(job_dir) / "attempts"
    found = [Path(job_dir)] + (sorted(p for p in extra.iterdir() if p.is_dir()) if extra.is_dir() else [])
    started = {}
    for d in found:
        try:
            started[d] = json.loads((d / "ATTEMPT.json").read_text())["started_unix_s"]
        except (OSError, ValueError, KeyError):
            pass
    return sorted(started, key=started.get)


class RestartCase(E2ECase):
    def setUp(self):
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                self.skipTest(f"{binary} is not built")
        self.root = tempfile.mkdtemp(prefix="hangwatch-restarts-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.job_dir = Path(self.root) / JOB

    def env(self, faults="", mode="abort", extra=None):
        env = report_jobs.watchdog_env(self.root, faults=faults)
        env["HANGWATCH_ON_HANG"] = mode
        env.update(extra or {})
        return env

    def run_job(self, nranks, faults="", mode="abort", extra=None, launcher=None, steps=30, wait_s=240):
        """Runs until the launcher returns (abort mode, or a healthy job); returns (exit code, output)."""
        argv = report_jobs.job_argv("ring_train", [], steps)
        with MpiJob(nranks, argv, env=self.env(faults, mode, extra), launcher=launcher) as job:
            code = job.wait_exit(wait_s)
            return code, job.output()

    def report(self, attempt=None):
        extra = ("--attempt", str(attempt)) if attempt else ()
        code, out, err = report_jobs.report(self.job_dir, "json", extra)
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def assert_names_link(self, rep, link, world, context=""):
        v = rep["verdict"]
        self.assertEqual(v["kind"], "communication-hang", json.dumps(v, indent=1) + context)
        self.assertTrue(v["confident"], json.dumps(v, indent=1))
        self.assertEqual(v["culprit_link"], {"from": link[0], "to": link[1]}, json.dumps(v, indent=1))
        self.assertEqual(rep["world_size"], world)
        self.assertEqual(rep["ranks_missing"], [])

    def assert_healthy_run(self, code, out, attempt_dir):
        self.assertEqual(code, 0, out[-3000:])
        self.assertNotIn("TRIGGER.json seen", out)
        self.assertNotIn("hang detected", out)
        self.assertFalse((attempt_dir / "TRIGGER.json").exists())
        self.assertFalse((attempt_dir / "ranks").exists(), out[-2000:])


class HealthyJobAfterAHungOne(RestartCase):
    """The bug that turned one hang into a dead job: a later launch saw the earlier TRIGGER.json
    or the node's board from /dev/shm and aborted at once."""

    def hang_then_run_healthy(self, between=None, launcher=None):
        code, out = self.run_job(4, "dead-link=1->2@op=5", launcher=launcher)
        self.assertIsNotNone(code, out[-3000:])
        self.assertTrue((self.job_dir / "TRIGGER.json").exists(), out[-3000:])
        if between:
            between()
        code, out = self.run_job(4, steps=12, launcher=launcher)
        newest = attempts_of(self.job_dir)[-1]
        self.assert_healthy_run(code, out, newest)
        return newest

    def test_same_folder_under_mpirun(self):
        newest = self.hang_then_run_healthy()
        self.assertNotEqual(newest, self.job_dir)
        self.assertTrue((self.job_dir / "ranks" / "r00001.watchdog.json").exists())

    def test_same_folder_and_the_same_launch_key_under_a_torchrun_like_launcher(self):
        # Both launches are "restart 0" of the same run id: told apart by the trigger's time.
        launcher = torchrun_like(4, run_id=JOB)
        newest = self.hang_then_run_healthy(launcher=launcher)
        self.assertEqual(newest.name, "restart-0.2")

    def test_folder_deleted_between_the_two(self):
        newest = self.hang_then_run_healthy(between=lambda: shutil.rmtree(self.job_dir))
        self.assertEqual(newest, self.job_dir)

    def test_first_job_killed_mid_dump(self):
        argv = report_jobs.job_argv("ring_train", [], 30)
        with MpiJob(4, argv, env=self.env("dead-link=1->2@op=5")) as job:
            snapshot = self.job_dir / "ranks" / "r00000.watchdog.json"
            dumping = job.wait_for(lambda _: snapshot.exists(), 120)
            self.assertTrue(dumping, job.output()[-3000:])
            for pid in job.pids().values():
                os.kill(pid, signal.SIGKILL)
        code, out = self.run_job(4, steps=12)
        self.assert_healthy_run(code, out, attempts_of(self.job_dir)[-1])


class TwoAttemptsOfOneJob(RestartCase):
    def test_under_mpirun_each_attempt_gets_its_own_verdict(self):
        code, out = self.run_job(8, "dead-link=5->6@op=6")
        self.assertIsNotNone(code, out[-3000:])
        code, out = self.run_job(4, "dead-link=1->2@op=6", extra={"TORCHELASTIC_RESTART_COUNT": "1"})
        self.assertIsNotNone(code, out[-3000:])
        newest = self.report()
        self.assert_names_link(newest, (1, 2), 4, out[-2000:])
        self.assertEqual((newest["attempt"]["number"], newest["attempt"]["count"]), (2, 2))
        self.assertEqual(newest["attempt"]["restart"], 1)
        self.assertNotEqual(newest["trigger"]["rank"], None)
        first = self.report(attempt=1)
        self.assert_names_link(first, (5, 6), 8)
        self.assertEqual(first["attempt"]["number"], 1)
        # Each attempt kept its report next to its own dumps.
        for d in attempts_of(self.job_dir):
            self.assertTrue((d / "report" / "report.json").exists(), d)

    def test_a_torchrun_like_launcher_restarting_the_job_itself(self):
        # The fault follows the restart count, as a different bad link would after a reschedule.
        wrapper = ["/bin/sh", "-c",
                   'case "$TORCHELASTIC_RESTART_COUNT" in 0) SIMGPU_FAULTS="dead-link=2->3@op=6";; '
                   '*) SIMGPU_FAULTS="dead-link=1->2@op=6";; esac; export SIMGPU_FAULTS; exec "$0" "$@"',
                   *report_jobs.job_argv("ring_train", [], 30)]
        launcher = torchrun_like(4, run_id=JOB, kill_grace=30, max_restarts=1)
        with MpiJob(4, wrapper, env=self.env(), launcher=launcher) as job:
            code = job.wait_exit(300)
            out = job.output()
        self.assertEqual(code, 1, out[-3000:])
        self.assertIn("restarting the workers (restart 1 of 1)", out)
        self.assert_names_link(self.report(), (1, 2), 4, out[-2000:])
        self.assert_names_link(self.report(attempt="restart-0"), (2, 3), 4)


class ThreeAttemptsOfTheSameWorldSize(RestartCase):
    def test_each_attempt_names_its_own_culprit_in_wait_and_abort_mode(self):
        links = [(0, 1), (1, 2), (2, 3)]
        modes = ["abort", "wait", "abort"]
        for i, (link, mode) in enumerate(zip(links, modes)):
            faults = f"dead-link={link[0]}->{link[1]}@op=6"
            if mode == "abort":
                code, out = self.run_job(4, faults)
                self.assertIsNotNone(code, out[-3000:])
                continue
            # Wait mode keeps the hung job as it is: the operator kills it once its dumps are done.
            argv = report_jobs.job_argv("ring_train", [], 30)
            with MpiJob(4, argv, env=self.env(faults, "wait")) as job:
                done = job.wait_for(lambda _: len(attempts_of(self.job_dir)) == i + 1 and report_jobs.dumps_complete(
                    attempts_of(self.job_dir)[-1], 4), 180)
                self.assertTrue(done, job.output()[-3000:])
                time.sleep(1)  # the state files follow the forensics dumps
        self.assertEqual(len(attempts_of(self.job_dir)), 3)
        for number, link in enumerate(links, start=1):
            rep = self.report(attempt=number)
            self.assert_names_link(rep, link, 4, f"\nattempt {number}")
            self.assertEqual(rep["attempt"]["count"], 3)


if __name__ == "__main__":
    unittest.main()
