"""Host-side misbehaviour flags of ring_train: the job stops progressing and the
culprit rank's stack names what it is doing instead of calling the collective."""
import unittest

from e2e_case import E2ECase
from harness import MpiJob, frames_text, ring_train_binary

SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]
STALL_RANK = 2
STALL_STEP = 5


class RingTrainHostStalls(E2ECase):
    def stalled_job(self, *flags):
        return MpiJob(4, [ring_train_binary(), "--steps", "50", *SMALL_MODEL, *flags])

    def stall(self, kind):
        job = self.stalled_job("--stall-rank", str(STALL_RANK), "--stall-at-step", str(STALL_STEP),
                               "--stall-kind", kind)
        self.addCleanup(job.kill)
        self.assert_stuck(job, last_step=STALL_STEP - 1)
        return job

    def assert_others_wait_in_collective(self, job, seq):
        threads = self.threads_of(job.pids()[0])
        rings = [t["ring"] for t in threads if t["name"].startswith("simnccl-ch") and t["ring"]]
        self.assertTrue(rings, frames_text(threads))
        for ring in rings:
            self.assertEqual(ring["wait_seq"], seq, ring)

    def test_host_loop_rank_spins_in_stall_in_host_loop(self):
        job = self.stall("host-loop")
        threads = self.threads_of(job.pids()[STALL_RANK])
        main = next(t for t in threads if t["lwp"] == job.pids()[STALL_RANK])
        self.assertIn("stall_in_host_loop", main["frames"], frames_text(threads))
        self.assert_others_wait_in_collective(job, seq=STALL_STEP)

    def test_sleep_rank_sleeps_in_stall_in_sleep(self):
        job = self.stall("sleep")
        threads = self.threads_of(job.pids()[STALL_RANK])
        main = next(t for t in threads if t["lwp"] == job.pids()[STALL_RANK])
        self.assertIn("stall_in_sleep", main["frames"], frames_text(threads))
        self.assert_others_wait_in_collective(job, seq=STALL_STEP)

    def test_dataloader_deadlock_starves_the_training_loop(self):
        job = self.stall("dataloader")
        threads = self.threads_of(job.pids()[STALL_RANK])
        loader = [t for t in threads if t["name"] == "dataloader"]
        self.assertEqual(len(loader), 1, frames_text(threads))
        self.assertIn("load_shard_blocking", loader[0]["frames"], frames_text(threads))
        main = next(t for t in threads if t["lwp"] == job.pids()[STALL_RANK])
        self.assertIn("Dataloader::next", main["frames"], frames_text(threads))
        self.assert_others_wait_in_collective(job, seq=STALL_STEP)

    def test_mismatched_collective_hangs_every_rank_at_that_step(self):
        job = self.stalled_job("--mismatch-rank", "1", "--mismatch-at-step", str(STALL_STEP))
        self.addCleanup(job.kill)
        self.assert_stuck(job, last_step=STALL_STEP - 1)
        threads = self.threads_of(job.pids()[1])
        main = next(t for t in threads if t["lwp"] == job.pids()[1])
        self.assertNotIn("ncclAllReduce", main["frames"], frames_text(threads))
        self.assertTrue(any(f.startswith("simnccl_wait") for t in threads for f in t["frames"]),
                        frames_text(threads))


if __name__ == "__main__":
    unittest.main()
