"""Base class of the end-to-end scenarios: runs jobs and attaches gdb, skipping
cleanly where this machine does not allow ptrace."""
import unittest

import harness


class E2ECase(unittest.TestCase):
    def threads_of(self, pid):
        try:
            return harness.gdb_threads(pid)
        except harness.PtraceDenied as e:
            self.skipTest(f"ptrace not permitted here, cannot inspect a hung rank: {e}")

    def assert_completes(self, job, timeout):
        code = job.wait_exit(timeout)
        out = job.output()
        self.assertIsNotNone(code, f"job did not finish within {timeout}s:\n{out[-3000:]}")
        self.assertEqual(code, 0, f"job failed:\n{out[-3000:]}")
        self.assertNotIn(" FAIL ", out)
        for rank in range(job.nranks):
            self.assertIn(f"{job.program} rank={rank} OK", out)
        return out

    def assert_stuck(self, job, last_step, timeout=60):
        ok, why = job.wait_until_stuck(last_step, timeout)
        self.assertTrue(ok, why)
