"""simgpu faults hang ring_train where the fault says, and a debugger attached to a
hung rank can read where each ring channel stopped."""
import time
import unittest

from e2e_case import E2ECase
from harness import MpiJob, frames_text, ring_train_binary

SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]


def ring_train_job(nranks, faults, steps=50):
    return MpiJob(nranks, [ring_train_binary(), "--steps", str(steps), *SMALL_MODEL],
                  env={"SIMGPU_FAULTS": faults})


def channel_threads(threads):
    return [t for t in threads if t["name"].startswith("simnccl-ch")]


class DeadLinkHangsTheEleventhCollective(E2ECase):
    def test_channels_wait_in_simnccl_wait_peer_at_seq_10(self):
        with ring_train_job(4, "dead-link=1->2@op=10") as job:
            self.assert_stuck(job, last_step=9)
            pids = job.pids()
            for rank in (1, 2):
                threads = self.threads_of(pids[rank])
                channels = channel_threads(threads)
                self.assertGreaterEqual(len(channels), 2, frames_text(threads))
                for t in channels:
                    self.assertIn("simnccl_wait_peer", t["frames"], frames_text(threads))
                    ring = t["ring"]
                    self.assertEqual(ring["function"], "simnccl_wait_peer")
                    self.assertEqual(ring["wait_seq"], 10, ring)
                    self.assertEqual(ring["wait_rank"], rank, ring)
                    self.assertEqual(ring["wait_op"], "AllReduce", ring)
                    self.assertIsInstance(ring["wait_target_step"], int, ring)
                    self.assertIsInstance(ring["wait_observed_step"], int, ring)
                    self.assertLess(ring["wait_observed_step"], ring["wait_target_step"], ring)
                    self.assertIn(ring["wait_direction"], (0, 1), ring)
                if rank == 2:
                    # The receiving end of the dead link starves on its ring prev, rank 1.
                    self.assertTrue(any(t["ring"]["wait_direction"] == 0 and t["ring"]["wait_peer"] == 1
                                        for t in channels), [t["ring"] for t in channels])


class DeadRankStallsInsideTheCollective(E2ECase):
    def test_host_runs_on_to_its_synchronize_and_channels_in_device_stalled(self):
        with ring_train_job(4, "dead-rank=2@op=5") as job:
            self.assert_stuck(job, last_step=4)
            threads = self.threads_of(job.pids()[2])
            main = next(t for t in threads if t["lwp"] == job.pids()[2])
            # The call returned once the work was queued (NCCL's src/enqueue.cc); the host
            # waits where it synchronizes with the stream, as its peers do.
            self.assertNotIn("ncclAllReduce", main["frames"], frames_text(threads))
            self.assertIn("cudaStreamSynchronize", main["frames"], frames_text(threads))
            channels = channel_threads(threads)
            self.assertGreaterEqual(len(channels), 2, frames_text(threads))
            for t in channels:
                self.assertIn("simnccl_device_stalled", t["frames"], frames_text(threads))


class FaultThatNeverFiresIsSaid(E2ECase):
    def test_a_link_no_collective_uses_is_named_at_the_end_with_why(self):
        # 0 -> 3 is neither on the ring (0 -> 1 -> 2 -> 3 -> 0) nor in the tree's chain.
        with ring_train_job(4, "dead-link=0->3@op=5", steps=10) as job:
            out = self.assert_completes(job, timeout=60)
        lines = [line for line in out.splitlines() if "never took effect" in line]
        self.assertEqual(lines, ["simgpu: fault 'dead-link=0->3@op=5' never took effect: from op 5 on, rank 0 sent "
                                 "nothing to rank 3: op 5 ran RING, whose connections from rank 0 go to rank(s) 1"],
                         out[-2000:])

    def test_an_op_never_reached_is_named_with_how_far_the_rank_got(self):
        with ring_train_job(2, "dead-rank=1@op=1000", steps=3) as job:
            out = self.assert_completes(job, timeout=60)
        self.assertRegex(out, r"simgpu: fault 'dead-rank=1@op=1000' never took effect: rank 1 never ran its op 1000 "
                              r"\(it ran \d+ operation\(s\) on its communicators\)")

    def test_of_two_faults_only_the_one_that_never_fired_is_named(self):
        # 1 -> 2 is on the ring, so its slowdown takes effect and the job still ends by itself;
        # 0 -> 3 is on no connection. (A hang ended by HANGWATCH_ON_HANG=abort would race:
        # the first rank whose check fails calls MPI_Abort and mpirun kills the rest before
        # they say anything at exit.)
        with ring_train_job(4, "slow-link=1->2:0.5;dead-link=0->3@op=3", steps=6) as job:
            out = self.assert_completes(job, timeout=60)
        lines = [line for line in out.splitlines() if "never took effect" in line]
        self.assertEqual(len(lines), 1, out[-3000:])
        self.assertIn("fault 'dead-link=0->3@op=3' never took effect", lines[0])


class BadFaultSpecIsRefused(E2ECase):
    def test_exits_non_zero_naming_the_bad_token(self):
        start = time.monotonic()
        with ring_train_job(2, "dead-link=1-2@op=3", steps=5) as job:
            code = job.wait_exit(30)
            out = job.output()
            self.assertIsNotNone(code, f"a bad SIMGPU_FAULTS should end the job quickly:\n{out[-2000:]}")
            self.assertNotEqual(code, 0, out[-2000:])
            self.assertIn("dead-link=1-2@op=3", out)
            self.assertNotIn("OK steps", out)
        self.assertLess(time.monotonic() - start, 30)


if __name__ == "__main__":
    unittest.main()
