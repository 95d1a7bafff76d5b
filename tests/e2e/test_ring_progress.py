"""Ring progress (issue 4): on a simgpu hang under the watchdog, every rank's collector
reads where each ring connection stopped (gdb-scripts/) into ranks/rNNNNN.forensics.json.

A connection X->Y is seen twice: X's record has it as `send` (observed_step = Y's head,
posted_step = what X wrote), Y's record as `recv` (observed_step = the tail Y saw,
target_step - 1 = what Y consumed). Progress of a view = observed_step - base_step."""
import json
import sys
import time
import unittest
from pathlib import Path

from harness import SOURCE_DIR
from test_watchdog import WatchdogCase, hangwatch_lib

sys.path.insert(0, str(SOURCE_DIR / "gdb-scripts"))
from hangwatch_gdb.ring_records import progress  # noqa: E402  (the verdict's rule, hangwatch::ringProgress)

NCCL_STEPS = 8


class RingProgressCase(WatchdogCase):
    def setUp(self):
        super().setUp()
        self.forensics = Path(hangwatch_lib()).parents[1] / "forensics" / "forensics"
        if not self.forensics.exists():
            self.skipTest(f"{self.forensics} is not built")

    def collect_hang(self, nranks, faults):
        """Runs ring_train until the watchdog's collectors wrote every rank's dump; returns
        ({rank: forensics dump}, {rank: watchdog snapshot})."""
        with self.job(nranks, [], 2, faults=faults, HANGWATCH_COLLECT="1", HANGWATCH_COLLECT_WAIT="60") as job:
            snapshots = self.wait_for_snapshots(job, nranks, 60)
            ranks = self.job_dir / "ranks"
            paths = {r: ranks / f"r{r:05d}.forensics.json" for r in range(nranks)}
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not all(p.exists() for p in paths.values()):
                time.sleep(0.5)
            logs = "\n".join(p.read_text(errors="replace") for p in ranks.glob("*.collect.log"))
            if "Operation not permitted" in logs:
                self.skipTest("ptrace not permitted here")
            for r, p in paths.items():
                self.assertTrue(p.exists(), f"rank {r} wrote no forensics dump; logs:\n{logs[-3000:]}")
            return {r: json.loads(p.read_text()) for r, p in paths.items()}, snapshots

    def hung_records(self, dumps, snapshots, nranks, seq):
        """{(rank, channel): record} of the world communicator's collective `seq`."""
        world = next(c for c in snapshots[0]["comms"] if c["size"] == nranks)
        records = {}
        for rank, dump in dumps.items():
            debugger = next(p for p in dump["phases"] if p["name"] == "debugger")
            self.assertTrue(debugger["ok"], f"rank {rank}: debugger phase failed: {debugger['error']}")
            mine = [r for r in dump["ring_progress"] if r["comm"] == world["hash"] and r["seq"] == seq]
            self.assertTrue(mine, f"rank {rank}: no ring progress for comm {world['hash']} seq {seq}: "
                                  f"{dump['ring_progress']} errors={dump['errors']}")
            for r in mine:
                self.assertEqual(r["rank"], rank)
                self.assertEqual(r["comm_size"], nranks)
                self.assertEqual(r["op"], "ncclAllReduce")
                self.assertEqual((r["algorithm"], r["protocol"], r["source"]), ("RING", "SIMPLE", "sim-frame"))
                self.assertEqual((r["prev"], r["next"]), ((rank - 1) % nranks, (rank + 1) % nranks))
                self.assertTrue(all(w["name"] == f"simnccl-ch{r['channel']}" for w in r["waiting_threads"]),
                                r["waiting_threads"])
                records[(rank, r["channel"])] = r
        channels = {c for _, c in records}
        self.assertTrue(channels)
        for rank in range(nranks):
            self.assertEqual({c for r, c in records if r == rank}, channels, f"rank {rank} misses channels")
        return records, sorted(channels)

    def views(self, records, channel, nranks):
        """{(from, to, "send"|"recv"): progress} of every connection view on `channel`."""
        out = {}
        for rank in range(nranks):
            r = records[(rank, channel)]
            if r["send"]:
                out[(rank, r["send"]["peer"], "send")] = progress(r["send"])
            if r["recv"]:
                out[(r["recv"]["peer"], rank, "recv")] = progress(r["recv"])
        return out

    def assert_consistent(self, records, channel, nranks, dead_link=None):
        """What Y observed from X equals what X posted, within the in-flight window."""
        for x in range(nranks):
            y = (x + 1) % nranks
            send, recv = records[(x, channel)]["send"], records[(y, channel)]["recv"]
            if send is None or recv is None:
                continue
            self.assertEqual((send["peer"], recv["peer"]), (y, x))
            # X's head is what Y consumed.
            self.assertEqual(send["observed_step"], recv["target_step"] - 1, f"{x}->{y} ch{channel}")
            if (x, y) == dead_link:
                self.assertLessEqual(recv["observed_step"], send["posted_step"])
                self.assertLessEqual(send["posted_step"], recv["observed_step"] + NCCL_STEPS)
            else:
                self.assertEqual(recv["observed_step"], send["posted_step"], f"{x}->{y} ch{channel}")
            self.assertLessEqual(send["posted_step"] - send["observed_step"], NCCL_STEPS)

    def check_dead_link(self, nranks, a, b, k):
        dumps, snapshots = self.collect_hang(nranks, f"dead-link={a}->{b}@op={k}")
        records, channels = self.hung_records(dumps, snapshots, nranks, k)
        for channel in channels:
            views = self.views(records, channel, nranks)
            least = min(views.values())
            self.assertEqual({(f, t) for (f, t, _), p in views.items() if p == least}, {(a, b)},
                             f"channel {channel}: {views}")
            self.assertIn((a, b, "recv"), views)
            self.assertEqual(views[(a, b, "recv")], least)
            self.assertTrue(records[(b, channel)]["recv"]["waiting"])
            self.assert_consistent(records, channel, nranks, dead_link=(a, b))


class DeadLinkRingProgress(RingProgressCase):
    def test_four_ranks_show_the_dead_link_with_least_progress_on_every_channel(self):
        self.check_dead_link(4, 1, 2, 10)

    def test_eight_ranks_show_the_dead_link_with_least_progress_on_every_channel(self):
        self.check_dead_link(8, 5, 6, 7)


class DeadRankRingProgress(RingProgressCase):
    def test_both_neighbours_connections_toward_the_dead_rank_show_least_progress(self):
        nranks, dead, k = 4, 2, 10
        dumps, snapshots = self.collect_hang(nranks, f"dead-rank={dead}@op={k}")
        records, channels = self.hung_records(dumps, snapshots, nranks, k)
        before, after = (dead - 1) % nranks, (dead + 1) % nranks
        for channel in channels:
            self.assertTrue(records[(dead, channel)]["stalled"])
            views = self.views(records, channel, nranks)
            least = min(views.values())
            at_least = {v for v, p in views.items() if p == least}
            self.assertEqual(at_least, {(before, dead, "send"), (dead, after, "recv")}, f"channel {channel}: {views}")
            self.assert_consistent(records, channel, nranks)


if __name__ == "__main__":
    unittest.main()
