"""ring_train under real Slurm (Debian's slurmctld/slurmd/srun, slurm_cluster.py: one machine,
started once for every case here), with the watchdog preloaded into the tasks only
(`srun --export=ALL,LD_PRELOAD=...`: srun itself stays clean).

- A healthy job: no trigger, no warning, and the metrics carry Slurm's ranks and node name.
- `--kill-on-bad-exit=1`: one rank dies inside a collective and Slurm ends the step at once
  (SIGTERM to every other task, SIGKILL after KillWait). With HANGWATCH_TIMEOUT far away, the
  launcher's SIGTERM is what declares the hang: the others dump before they die, and the report
  names the rank that died.
- `scancel` while the collectors run: every rank's dumps are complete (the SIGTERM waits for
  them) and the job still ends by the signal, as Slurm meant it to.
- `scontrol requeue` of a hung batch job in abort mode: the second run (same job id,
  SLURM_RESTART_COUNT=1) is not touched by the first; each attempt has its own folder and verdict.
- A hung job that reaches its time limit (`--time=1`) while its collectors still run: Slurm's
  SIGTERM is held 20 s, then goes on; what the collectors could not finish is marked so in each
  rank's state, the report says why, and no file is torn. Slurm ends a job at its limit only when
  slurmctld next checks (every 30 s), 60-90 s after it started: the job starts with the cluster
  and runs beside the other cases, and its case is the last to be checked."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from harness import MpiJob
from slurm_cluster import SlurmCluster, free_port

NRANKS = 4
TIME_LIMIT_JOB = "hangwatch-time-limit"
# A collector slower than any launcher waits (cuda-gdb attaching to a large process can take
# minutes): it only sleeps. It inherits the blocked SIGTERM, so Slurm's SIGKILL ends it. The
# watchdog's other use of the binary, its dump-folder helper, is the real one.
SLOW_COLLECTOR = """#!/usr/bin/env python3
import os, sys, time
if sys.argv[1:2] == ["io-helper"]:
    os.execv({forensics!r}, [{forensics!r}] + sys.argv[1:])
time.sleep(600)
"""


class RealSlurm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = SlurmCluster.missing()
        if why:
            if os.environ.get("HANGWATCH_REQUIRE_SLURM"):
                raise AssertionError(f"Slurm is required here (HANGWATCH_REQUIRE_SLURM) but {why}")
            raise unittest.SkipTest(why)
        cls.cluster = SlurmCluster().start()
        cls.time_limit_root = Path(tempfile.mkdtemp(prefix="hangwatch-slurm-time-limit-"))
        try:
            cls.time_limit_job = cls.submit_time_limit_job(cls.time_limit_root)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        shutil.rmtree(getattr(cls, "time_limit_root", ""), True)

    @classmethod
    def submit_time_limit_job(cls, root):
        """A batch job of one minute whose ring hangs on a dead link after a few steps (wait mode),
        with collectors that never finish in time."""
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                raise unittest.SkipTest(f"{binary} is not built")
        slow = root / "slow-collector"
        slow.write_text(SLOW_COLLECTOR.format(forensics=str(report_jobs.forensics_binary())))
        slow.chmod(0o755)
        env = report_jobs.watchdog_env(root, timeout_s=3, faults="dead-link=1->2@op=10")
        env.update({"HANGWATCH_JOB_ID": "", "HANGWATCH_FORENSICS": str(slow), "HANGWATCH_COLLECT_WAIT": "120"})
        preload = env.pop("LD_PRELOAD")
        env.update(cls.cluster.env)
        argv = " ".join(report_jobs.job_argv("ring_train", [], 100000))
        script = root / "job.sh"
        script.write_text(f"""#!/bin/bash
export MASTER_ADDR=127.0.0.1 MASTER_PORT={free_port()}
srun --export=ALL,LD_PRELOAD={preload} {argv}
""")
        sub = subprocess.run(["sbatch", "--parsable", "--time=1", "-J", TIME_LIMIT_JOB, "-n", str(NRANKS),
                              "-o", str(root / "slurm.out"), str(script)], env={**os.environ, **env},
                             capture_output=True, text=True, check=True)
        return sub.stdout.strip().split(";")[0]

    def setUp(self):
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                self.skipTest(f"{binary} is not built")
        self.root = Path(tempfile.mkdtemp(prefix="hangwatch-slurm-job-"))
        self.addCleanup(shutil.rmtree, self.root, True)
        self.addCleanup(self.cluster.cancel_all, but=(TIME_LIMIT_JOB,))

    def start(self, args, steps, timeout_s, srun_opts=(), extra_env=None, faults=""):
        env = report_jobs.watchdog_env(self.root, timeout_s=timeout_s, faults=faults)
        env["HANGWATCH_JOB_ID"] = ""  # the job's folder is named by SLURM_JOB_ID
        preload = env.pop("LD_PRELOAD")
        env.update(self.cluster.env)
        # env:// as an sbatch script sets it up; each task takes its rank from SLURM_PROCID.
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
        env.update(extra_env or {})
        launcher = ["srun", "-n", str(NRANKS), "--export=ALL,LD_PRELOAD=" + preload, *srun_opts]
        return MpiJob(NRANKS, report_jobs.job_argv("ring_train", args, steps), env=env, launcher=launcher)

    def job_dir(self, out):
        dirs = [d for d in self.root.iterdir() if d.is_dir()]
        self.assertEqual(len(dirs), 1, f"{dirs}\n{out[-3000:]}")
        self.assertRegex(dirs[0].name, r"^\d+$", "the job's folder is named by SLURM_JOB_ID")
        return dirs[0]

    def assert_rank_dumped(self, job_dir, rank, out):
        ranks = job_dir / "ranks"
        context = f"rank {rank}\n{out[-4000:]}"
        snapshot = json.loads((ranks / f"r{rank:05d}.watchdog.json").read_text())
        self.assertEqual(snapshot["identity"]["rank"], rank, context)
        self.assertEqual(snapshot["identity"]["rank_source"], "SLURM_PROCID", context)
        state = json.loads((ranks / f"r{rank:05d}.state.json").read_text())
        self.assertEqual(state["state"], "done", context)
        self.assertEqual(state["forensics"], "written", context)
        dump = json.loads((ranks / f"r{rank:05d}.forensics.json").read_text())
        self.assertIsNone(dump.get("target_exited_during"), f"{dump['errors']}\n{context}")
        self.assertTrue(dump["threads"], context)

    def test_a_healthy_job_triggers_nothing_and_its_metrics_carry_slurms_ranks_and_node(self):
        with self.start([], steps=12, timeout_s=20, extra_env={"HANGWATCH_METRICS_INTERVAL": "1"}) as job:
            code = job.wait_exit(120)
            out = job.output()
        self.assertEqual(code, 0, out[-3000:])
        job_dir = self.job_dir(out)
        self.assertFalse((job_dir / "TRIGGER.json").exists(), out[-3000:])
        self.assertEqual(list(job_dir.glob("SUSPECT*")), [], out[-3000:])
        said = [l for l in out.splitlines() if l.startswith("hangwatch[")]
        self.assertEqual(said, [], "a healthy job under srun: the watchdog says nothing")
        node = subprocess.run(["srun", "-n", "1", "printenv", "SLURMD_NODENAME"], env=self.cluster.env,
                              capture_output=True, text=True, timeout=60).stdout.strip()
        self.assertTrue(node)
        for rank in range(NRANKS):
            lines = (job_dir / "metrics" / f"r{rank:05d}.jsonl").read_text().splitlines()
            self.assertTrue(lines, f"rank {rank} wrote no metrics window")
            window = json.loads(lines[-1])
            self.assertEqual(window["rank"], rank)
            self.assertEqual(window["host"], node)

    def test_kill_on_bad_exit_the_others_dump_before_slurm_ends_them_and_the_dead_rank_is_named(self):
        start = time.monotonic()
        with self.start(["--exit-rank", "2", "--exit-at-step", "4", "--exit-how", "kill"], steps=40,
                        timeout_s=600, srun_opts=["--kill-on-bad-exit=1"]) as job:
            code = job.wait_exit(120)
            out = job.output()
        seconds = time.monotonic() - start
        self.assertIsNotNone(code, out[-3000:])
        self.assertNotEqual(code, 0, out[-3000:])
        job_dir = self.job_dir(out)
        self.assertTrue((job_dir / "TRIGGER.json").exists(),
                        f"{sorted(str(p) for p in job_dir.rglob('*'))[:40]}\n{out[-5000:]}")
        trigger = json.loads((job_dir / "TRIGGER.json").read_text())
        self.assertEqual(trigger["reason"], "launcher-signal", trigger)
        self.assertEqual(trigger["stuck_op"]["op"], "ncclAllReduce", trigger)
        for rank in (0, 1, 3):
            self.assert_rank_dumped(job_dir, rank, out)
        self.assertIn("SIGTERM from the launcher while", out)
        # Slurm's SIGTERM went on once the dumps were done: nobody waited for KillWait's SIGKILL.
        self.assertNotRegex(out, r"(?i)killed.*signal 9|SIGKILL")
        rep = report_jobs.report_json(job_dir)
        v = rep["verdict"]
        self.assertEqual(v["kind"], "communication-hang", json.dumps(v, indent=1))
        self.assertEqual(v["culprit_ranks"], [2], json.dumps(v, indent=1))
        self.assertTrue(v["confident"], json.dumps(v, indent=1))
        self.assertTrue(any("had exited" in e for e in v["evidence"]), v["evidence"])
        self.assertTrue(any("SIGTERM" in e for e in v["evidence"]), v["evidence"])
        print(f"kill-on-bad-exit: the step ended {seconds:.0f} s after it started, every survivor dumped")

    def test_scancel_while_the_collectors_run_loses_no_dump(self):
        # Wait mode: the job stays hung after its own timeout; scancel lands while it dumps.
        with self.start([], steps=60, timeout_s=3, faults="dead-link=1->2@op=10") as job:
            def collecting():
                ranks = self.root.glob("*/ranks/r*.state.json")
                states = []
                for p in ranks:
                    try:
                        states.append(json.loads(p.read_text()))
                    except (OSError, ValueError):
                        return False
                return len(states) == NRANKS and any(s["state"] != "done" for s in states)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not collecting() and job.proc.poll() is None:
                time.sleep(0.05)
            self.assertTrue(collecting(), f"the collectors were never seen at work\n{job.output()[-3000:]}")
            jobs = self.cluster.jobs(but=(TIME_LIMIT_JOB,))
            self.assertEqual(len(jobs), 1, jobs)
            subprocess.run(["scancel", jobs[0]], env=self.cluster.env, check=True)
            code = job.wait_exit(120)
            out = job.output()
        self.assertIsNotNone(code, out[-3000:])
        self.assertNotEqual(code, 0, out[-3000:])
        job_dir = self.job_dir(out)
        for rank in range(NRANKS):
            self.assert_rank_dumped(job_dir, rank, out)
        self.assertIn("SIGTERM held back while dumping; passing it on now", out)
        rep = report_jobs.report_json(job_dir)
        self.assertEqual(rep["ranks_missing"], [])
        self.assertEqual(rep["verdict"]["culprit_link"], {"from": 1, "to": 2}, json.dumps(rep["verdict"], indent=1))


    def job_state(self, job_id):
        out = subprocess.run(["scontrol", "show", "job", job_id], env=self.cluster.env, capture_output=True,
                             text=True).stdout
        m = re.search(r"JobState=(\S+)", out)
        return m[1] if m else ""

    def wait_job(self, job_id, states, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.job_state(job_id) in states:
                return True
            time.sleep(0.5)
        return False

    def test_a_requeued_hung_batch_job_gets_a_folder_and_a_verdict_per_attempt(self):
        # The batch script runs ring_train under srun; its first run hangs on a dead link (the
        # fault follows SLURM_RESTART_COUNT, as another bad link would after a reschedule),
        # dumps and aborts. The operator requeues it: same job id, SLURM_RESTART_COUNT=1, clean.
        env = report_jobs.watchdog_env(self.root, timeout_s=3)
        env.update({"HANGWATCH_JOB_ID": "", "HANGWATCH_ON_HANG": "abort", "SIMGPU_FAULTS": ""})
        preload = env.pop("LD_PRELOAD")
        env.update(self.cluster.env)
        argv = " ".join(report_jobs.job_argv("ring_train", [], 30))
        script = self.root / "job.sh"
        script.write_text(f"""#!/bin/bash
case "${{SLURM_RESTART_COUNT:-0}}" in 0) export SIMGPU_FAULTS="dead-link=1->2@op=6";; esac
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$(( {free_port()} + ${{SLURM_RESTART_COUNT:-0}} ))
srun --export=ALL,LD_PRELOAD={preload} {argv}
""")
        log = self.root / "slurm.out"
        sub = subprocess.run(["sbatch", "--parsable", "--requeue", "-n", str(NRANKS), "--open-mode=append",
                              "-o", str(log), str(script)], env={**os.environ, **env}, capture_output=True,
                             text=True, check=True)
        job_id = sub.stdout.strip().split(";")[0]
        output = lambda: log.read_text(errors="replace")[-4000:] if log.exists() else ""
        self.assertTrue(self.wait_job(job_id, ("FAILED",), 120), f"{self.job_state(job_id)}\n{output()}")
        subprocess.run(["scontrol", "requeue", job_id], env=self.cluster.env, check=True)
        self.assertTrue(self.wait_job(job_id, ("COMPLETED",), 120), f"{self.job_state(job_id)}\n{output()}")
        job_dir = self.root / job_id
        attempts = [job_dir] + sorted(p for p in (job_dir / "attempts").iterdir() if p.is_dir())
        self.assertEqual(len(attempts), 2, f"{attempts}\n{output()}")
        # The newest attempt is the clean run: no trigger, nothing of the first one in it.
        code, out, err = report_jobs.report(job_dir, "json")
        self.assertEqual(code, 0, err)
        newest = json.loads(out)
        self.assertEqual((newest["attempt"]["number"], newest["attempt"]["count"]), (2, 2), newest["attempt"])
        self.assertEqual(newest["attempt"]["restart"], 1)
        self.assertEqual(newest["verdict"]["kind"], "no-hang", json.dumps(newest["verdict"], indent=1))
        code, out, err = report_jobs.report(job_dir, "json", ("--attempt", "1"))
        self.assertEqual(code, 0, err)
        first = json.loads(out)
        self.assertEqual(first["verdict"]["culprit_link"], {"from": 1, "to": 2}, json.dumps(first["verdict"], indent=1))
        self.assertEqual(first["ranks_missing"], [])

    def test_time_limit_reached_while_the_collectors_run_marks_what_was_cut_short(self):
        # Named to run last: the job started with the cluster and has been hanging since.
        job_id = self.time_limit_job
        log = self.time_limit_root / "slurm.out"
        output = lambda: log.read_text(errors="replace")[-4000:] if log.exists() else ""
        self.assertTrue(self.wait_job(job_id, ("TIMEOUT",), 150), f"{self.job_state(job_id)}\n{output()}")
        # TIMEOUT is said as the limit is reached: wait until every process of the job has ended.
        deadline = time.monotonic() + 60
        while job_id in self.cluster.jobs() and time.monotonic() < deadline:
            time.sleep(0.5)
        self.assertNotIn(job_id, self.cluster.jobs(), output())
        out = log.read_text(errors="replace")
        self.assertIn("DUE TO TIME LIMIT", out)
        job_dir = self.time_limit_root / job_id
        trigger = json.loads((job_dir / "TRIGGER.json").read_text())
        self.assertEqual(trigger["stuck_op"]["op"], "ncclAllReduce", trigger)
        self.assertEqual(report_jobs.every_json_whole(job_dir), [])
        self.assertEqual(list(job_dir.rglob("*.tmp.*")), [])
        for rank in range(NRANKS):
            snapshot = json.loads((job_dir / "ranks" / f"r{rank:05d}.watchdog.json").read_text())
            self.assertEqual(snapshot["identity"]["rank"], rank)
            state = json.loads((job_dir / "ranks" / f"r{rank:05d}.state.json").read_text())
            # Cut short, and marked so: the rank wrote why before Slurm's SIGTERM went on.
            self.assertEqual(state["state"], "collecting", f"rank {rank}: {state}\n{out[-3000:]}")
            self.assertIn("the launcher's SIGTERM ended the process 20 s after it came", state["note"])
            self.assertGreater(state["collector_pid"], 0)
        self.assertEqual(len(re.findall(r"SIGTERM held 20 s, the most it may be; the collector \(pid \d+\)", out)),
                         NRANKS, out[-3000:])
        code, text, err = report_jobs.report(job_dir, "json", ("--wait", "0"))
        self.assertEqual(code, 0, err)
        rep = json.loads(text)
        self.assertEqual(rep["ranks_missing"], [])
        partial = {p["rank"]: p for p in rep["ranks_partial"]}
        self.assertEqual(sorted(partial), list(range(NRANKS)), rep["ranks_partial"])
        for p in partial.values():
            self.assertEqual(p["missing"], "forensics dump", p)
            self.assertIn("the launcher's SIGTERM ended the process", p["reason"])
        # One node, no debugger's ring progress: NCCL's profiler sees no network connection, so the
        # honest verdict may be unsure; never a confident wrong culprit.
        v = rep["verdict"]
        self.assertIn(v["kind"], ("communication-hang", "inconclusive"), json.dumps(v, indent=1))
        if v["confident"]:
            self.assertEqual(v.get("culprit_link"), {"from": 1, "to": 2}, json.dumps(v, indent=1))
        else:
            suspected = {r for s in v["suspects"] for r in (s.get("ranks") or [])}
            self.assertTrue({1, 2} <= suspected, json.dumps(v, indent=1))
        code, text, err = report_jobs.report(job_dir, "text", ("--wait", "0"))
        self.assertEqual(code, 0, err)
        self.assertIn("the launcher's SIGTERM ended the process", text)


if __name__ == "__main__":
    unittest.main()
