"""python_train (train.py through libtrainshim.so) completes, and its dataloader
deadlock leaves the training loop blocked on the batch queue."""
import os
import sys
import unittest

from e2e_case import E2ECase
from harness import MpiJob, frames_text, train_py

# Native frames of a thread blocked acquiring a Python lock (queue.get ends there).
LOCK_WAIT_FRAMES = ("PyThread_acquire_lock_timed", "acquire_timed", "lock_PyThread_acquire_lock", "sem_clock_wait",
                    "do_futex_wait")


def python_job(nranks, *flags):
    return MpiJob(nranks, [sys.executable, train_py(), "--grad-mb", "1", "--hidden", "128", *flags],
                  program="python_train")


class PythonTrain(E2ECase):
    def setUp(self):
        shim = os.environ.get("TRAIN_SHIM")
        if not shim or not os.path.exists(shim):
            self.skipTest(f"TRAIN_SHIM ({shim}) not built")

    def test_completes_on_four_ranks(self):
        with python_job(4, "--steps", "20") as job:
            self.assert_completes(job, timeout=90)
            self.assertEqual(job.steps_done(), {r: 19 for r in range(4)})

    def test_dataloader_deadlock_blocks_main_thread_in_queue_get(self):
        with python_job(4, "--steps", "50", "--stall-rank", "2", "--stall-at-step", "5",
                        "--stall-kind", "dataloader") as job:
            self.assert_stuck(job, last_step=4)
            pid = job.pids()[2]
            threads = self.threads_of(pid)
            main = next(t for t in threads if t["lwp"] == pid)
            self.assertTrue(any(f in main["frames"] for f in LOCK_WAIT_FRAMES), frames_text(threads))
            # The dataloader thread is blocked on a lock as well, not gone.
            others = [t for t in threads if t["lwp"] != pid and any(f in t["frames"] for f in LOCK_WAIT_FRAMES)]
            self.assertTrue(others, frames_text(threads))


if __name__ == "__main__":
    unittest.main()
