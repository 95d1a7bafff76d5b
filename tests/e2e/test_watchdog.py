"""libhangwatch.so in every rank of ring_train on simgpu (DESIGN.md §4): on a hang every
rank dumps a snapshot through one TRIGGER.json; a healthy job writes none."""
import json
import os
import shutil
import tempfile
import time
import unittest
from pathlib import Path

from e2e_case import E2ECase
from harness import MpiJob, ring_train_binary

SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]
JOB_ID = "e2e"


def hangwatch_lib():
    if os.environ.get("HANGWATCH_LIB"):
        return os.environ["HANGWATCH_LIB"]
    # ring_train lives in <build>/examples/ring_train/; the library in <build>/watchdog/.
    return str(Path(ring_train_binary()).resolve().parents[2] / "watchdog" / "libhangwatch.so")


class WatchdogCase(E2ECase):
    def setUp(self):
        if not Path(hangwatch_lib()).exists():
            self.skipTest(f"{hangwatch_lib()} is not built")
        self.dump_root = tempfile.mkdtemp(prefix="hangwatch-e2e-")
        self.addCleanup(shutil.rmtree, self.dump_root, True)
        self.job_dir = Path(self.dump_root) / JOB_ID

    def job(self, nranks, args, timeout_s, faults="", steps=50, **extra_env):
        env = {"LD_PRELOAD": hangwatch_lib(), "HANGWATCH_DUMP_DIR": self.dump_root, "HANGWATCH_JOB_ID": JOB_ID,
               "HANGWATCH_TIMEOUT": str(timeout_s), "HANGWATCH_COLLECT": "0", "SIMGPU_FAULTS": faults}
        env.update(extra_env)
        return MpiJob(nranks, [ring_train_binary(), "--steps", str(steps), *SMALL_MODEL, *args], env=env)

    def snapshot_path(self, rank):
        return self.job_dir / "ranks" / f"r{rank:05d}.watchdog.json"

    def wait_for_snapshots(self, job, nranks, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.snapshot_path(r).exists() for r in range(nranks)):
                return {r: json.loads(self.snapshot_path(r).read_text()) for r in range(nranks)}
            time.sleep(0.2)
        present = sorted(p.name for p in (self.job_dir / "ranks").glob("*")) if self.job_dir.exists() else []
        self.fail(f"not every rank dumped within {timeout}s; present: {present}\n{job.output()[-3000:]}")

    def trigger(self):
        return json.loads((self.job_dir / "TRIGGER.json").read_text())

    def assert_exactly_one_trigger(self):
        triggers = sorted(p.name for p in self.job_dir.iterdir() if p.name.startswith("TRIGGER"))
        self.assertEqual(triggers, ["TRIGGER.beacon", "TRIGGER.json"])
        # The winner alone announced it; rank 0 may have added that every rank is done.
        lines = (self.job_dir / "TRIGGER.beacon").read_text().splitlines()
        self.assertEqual(sum(1 for line in lines if line.startswith("triggered")), 1, lines)

    def assert_dumped_within(self, snapshots, trigger, limit_s):
        # The hang began when the stuck op got its turn: detection time minus its age.
        hang_start = trigger["time_unix_s"] - trigger["stuck_op"]["age_s"]
        for rank, s in snapshots.items():
            self.assertLessEqual(s["time_unix_s"] - hang_start, limit_s, f"rank {rank} dumped late")

    @staticmethod
    def front_ops(snapshot):
        return [st["pending"][0] for st in snapshot["streams"] if st["pending"]]

    @staticmethod
    def world(snapshot):
        return next(c for c in snapshot["comms"] if c["size"] == 4)


class DeadLinkDumpsEveryRank(WatchdogCase):
    def test_every_rank_dumps_the_allreduce_at_seq_10_through_one_trigger(self):
        timeout = 3
        with self.job(4, [], timeout, faults="dead-link=1->2@op=10") as job:
            snapshots = self.wait_for_snapshots(job, 4, 60)
            time.sleep(1)  # late detectors would race for the trigger now
            self.assert_exactly_one_trigger()
            trigger = self.trigger()
            self.assertIn(trigger["rank"], range(4))
            self.assertEqual(trigger["stuck_op"]["op"], "ncclAllReduce")
            self.assertEqual(trigger["stuck_op"]["seq"], 10)
            self.assert_dumped_within(snapshots, trigger, timeout + 2)
            hashes = set()
            for rank, s in snapshots.items():
                self.assertEqual(s["identity"]["rank"], rank)
                self.assertEqual(s["identity"]["pid"], job.pids()[rank])
                front = self.front_ops(s)
                self.assertEqual([(op["op"], op["seq"]) for op in front], [("ncclAllReduce", 10)], s["streams"])
                world = self.world(s)
                self.assertEqual(world["last_issued_seq"], 10)
                self.assertEqual(world["last_completed_seq"], 9)
                self.assertEqual(world["rank"], rank)
                hashes.add(world["hash"])
            self.assertEqual(len(hashes), 1, "ranks disagree on the communicator hash")


class HostLoopStallIsOneSeqBehind(WatchdogCase):
    def test_stalled_rank_dumps_through_the_trigger_one_seq_behind(self):
        timeout = 3
        stall = ["--stall-rank", "2", "--stall-kind", "host-loop", "--stall-at-step", "5"]
        with self.job(4, stall, timeout) as job:
            snapshots = self.wait_for_snapshots(job, 4, 60)
            self.assert_exactly_one_trigger()
            trigger = self.trigger()
            self.assertIn(trigger["rank"], (0, 1, 3))
            self.assert_dumped_within(snapshots, trigger, timeout + 2)
            self.assertTrue(snapshots[trigger["rank"]]["detected_here"])
            for rank in (0, 1, 3):
                # A waiting rank whose op began a little later may see TRIGGER.json
                # before its own timeout: it then follows the trigger, which is fine.
                if not snapshots[rank]["detected_here"]:
                    self.assertEqual(snapshots[rank]["trigger"]["rank"], trigger["rank"], rank)
                self.assertEqual([(op["op"], op["seq"]) for op in self.front_ops(snapshots[rank])],
                                 [("ncclAllReduce", 5)])
                self.assertEqual(self.world(snapshots[rank])["last_issued_seq"], 5)
            stalled = snapshots[2]
            self.assertFalse(stalled["detected_here"])
            self.assertEqual(stalled["trigger"]["rank"], trigger["rank"])
            self.assertEqual(self.world(stalled)["last_issued_seq"], 4)
            self.assertFalse(any(op["class"] == "collective" for op in self.front_ops(stalled)))


class DeadRanksHostRunsOn(WatchdogCase):
    def test_dead_rank_returned_from_the_call_and_its_collective_is_pending_like_its_peers(self):
        # As with NCCL, a rank whose GPU stopped returns from ncclAllReduce once the work is
        # queued: no host thread is inside a call, and its snapshot looks like its peers'.
        with self.job(4, [], 3, faults="dead-rank=2@op=5") as job:
            snapshots = self.wait_for_snapshots(job, 4, 60)
            self.assertEqual(snapshots[2]["host_calls"], [], snapshots[2]["host_calls"])
            for rank in range(4):
                pending = [(op["op"], op.get("seq")) for op in self.front_ops(snapshots[rank])
                           if op["class"] == "collective"]
                self.assertIn(("ncclAllReduce", 5), pending, (rank, pending))


class HealthySlowRankNeverTriggers(WatchdogCase):
    def test_300_steps_with_a_half_speed_rank_and_2s_timeout_write_no_trigger(self):
        with self.job(4, ["--log-every", "50"], 2, faults="slow-rank=1:0.5", steps=300,
                      HANGWATCH_METRICS_INTERVAL="1") as job:
            self.assert_completes(job, 120)
        self.assertFalse((self.job_dir / "TRIGGER.json").exists())
        self.assertEqual(list((self.job_dir / "ranks").glob("*")) if (self.job_dir / "ranks").exists() else [], [])
        self.assertNotIn("hangwatch[", job.output())


class OnHangAbortEndsTheJob(WatchdogCase):
    def test_job_exits_non_zero_soon_after_the_dump(self):
        timeout = 2
        with self.job(4, [], timeout, faults="dead-link=1->2@op=10", HANGWATCH_ON_HANG="abort") as job:
            snapshots = self.wait_for_snapshots(job, 4, 60)
            dumped_at = time.monotonic()
            code = job.wait_exit(30)
            self.assertIsNotNone(code, f"job still running 30 s after the dump\n{job.output()[-3000:]}")
            self.assertNotEqual(code, 0)
            self.assertLess(time.monotonic() - dumped_at, 20)
            self.assertIn("HANGWATCH_ON_HANG=abort", job.output())
            self.assertEqual(len(snapshots), 4)


class CollectorRunsForEveryRank(WatchdogCase):
    def test_every_rank_starts_forensics_collect_on_itself(self):
        forensics = Path(hangwatch_lib()).parents[1] / "forensics" / "forensics"
        if not forensics.exists():
            self.skipTest(f"{forensics} is not built")
        with self.job(4, [], 2, faults="dead-link=1->2@op=10", HANGWATCH_COLLECT="1",
                      HANGWATCH_COLLECT_WAIT="60") as job:
            self.wait_for_snapshots(job, 4, 60)
            ranks = self.job_dir / "ranks"
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not all((ranks / f"r{r:05d}.forensics.json").exists()
                                                        for r in range(4)):
                time.sleep(0.5)
            logs = {r: (ranks / f"r{r:05d}.collect.log") for r in range(4)}
            for r, log in logs.items():
                self.assertTrue(log.exists(), f"rank {r} started no collector\n{job.output()[-2000:]}")
            text = "\n".join(log.read_text(errors="replace") for log in logs.values())
            if "Operation not permitted" in text:
                self.skipTest("ptrace not permitted here")
            for r in range(4):
                dump = ranks / f"r{r:05d}.forensics.json"
                self.assertTrue(dump.exists(), f"no {dump.name}; collector log:\n{logs[r].read_text()[-2000:]}")
                self.assertTrue(json.loads(dump.read_text())["threads"])


class DisabledIsAPassThrough(WatchdogCase):
    def test_hung_job_with_hangwatch_disabled_dumps_nothing_and_runs_no_poller(self):
        with self.job(4, [], 1, faults="dead-link=1->2@op=10", HANGWATCH_DISABLE="1") as job:
            ok, why = job.wait_until_stuck(9, 60, quiet_seconds=4)
            self.assertTrue(ok, why)
            self.assertFalse(self.job_dir.exists(), list(self.job_dir.rglob("*")) if self.job_dir.exists() else [])
            for pid in job.pids().values():
                names = {(t / "comm").read_text().strip() for t in Path(f"/proc/{pid}/task").iterdir()}
                self.assertNotIn("hangwatch-poll", names)


if __name__ == "__main__":
    unittest.main()
