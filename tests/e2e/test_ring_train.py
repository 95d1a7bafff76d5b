"""ring_train runs to the end with every collective result checked."""
import subprocess
import unittest

from e2e_case import E2ECase
from harness import MpiJob, ring_train_binary

SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]


class RingTrainCompletes(E2ECase):
    def run_to_end(self, nranks, *extra, steps=50):
        with MpiJob(nranks, [ring_train_binary(), "--steps", str(steps), *SMALL_MODEL, *extra]) as job:
            self.assert_completes(job, timeout=90)
            self.assertEqual(job.steps_done(), {r: steps - 1 for r in range(nranks)})
            self.assertEqual(len(job.pids()), nranks)
            self.assertIn(f"ring_train summary ranks={nranks} steps={steps}", job.output())

    def test_two_ranks(self):
        self.run_to_end(2)

    def test_three_ranks(self):
        self.run_to_end(3)

    def test_four_ranks(self):
        self.run_to_end(4)

    def test_eight_ranks(self):
        self.run_to_end(8)

    def test_tensor_parallel_pairs_on_four_ranks(self):
        self.run_to_end(4, "--tp", "2")

    def test_fp16_gemms(self):
        self.run_to_end(2, "--dtype", "fp16", steps=10)

    def test_slowdown_flags_only_slow_it_down(self):
        self.run_to_end(2, "--sync-every-layer", "--sync-rank", "1", "--gc-pause-ms", "20", "--gc-every", "3",
                        "--slow-dataloader-rank", "0", "--slow-dataloader-ms", "10", "--dataloader-ms", "1",
                        "--log-every", "5", steps=20)


class RingTrainCommandLine(unittest.TestCase):
    def run_directly(self, *args):
        return subprocess.run([ring_train_binary(), *args], capture_output=True, text=True, timeout=30)

    def test_unknown_flag_is_a_usage_error(self):
        result = self.run_directly("--stall-rnk", "1")
        self.assertEqual(result.returncode, 2)
        self.assertIn("unknown option '--stall-rnk'", result.stderr)
        self.assertIn("usage: ring_train", result.stderr)

    def test_bad_stall_kind_is_a_usage_error(self):
        result = self.run_directly("--stall-rank", "1", "--stall-at-step", "2", "--stall-kind", "nap")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--stall-kind", result.stderr)

    def test_exit_and_init_stall_flags_refuse_what_cannot_run(self):
        for args, said in ((["--exit-rank", "1"], "--exit-rank needs --exit-at-step"),
                           (["--exit-rank", "1", "--exit-at-step", "2", "--exit-how", "nap"], "--exit-how"),
                           (["--stall-rank", "1", "--stall-at-step", "init", "--stall-kind", "dataloader"],
                            "no dataloader runs before init")):
            result = self.run_directly(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(said, result.stderr)

    def test_pipeline_flags_refuse_what_the_pipeline_job_does_not_run(self):
        for args, said in ((["--skip-microbatch-rank", "1", "--skip-at-step", "2"], "--skip-microbatch-rank needs --pp"),
                           (["--pp", "2", "--skip-microbatch-rank", "1"], "needs --skip-at-step"),
                           (["--pp", "2", "--microbatches", "1", "--skip-microbatch-rank", "1", "--skip-at-step", "0"],
                            "--microbatches 2 or more"),
                           (["--pp", "2", "--cuda-graph"], "--cuda-graph is not run with --pp"),
                           (["--pp", "0"], "must be >= 1")):
            result = self.run_directly(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(said, result.stderr)

    def test_help_lists_the_misbehaviour_flags(self):
        result = self.run_directly("--help")
        self.assertEqual(result.returncode, 0)
        for flag in ("--stall-kind", "--mismatch-rank", "--sync-every-layer", "--gc-pause-ms", "--tp", "--exit-rank",
                     "--exit-how", "--pp", "--microbatches", "--skip-microbatch-rank"):
            self.assertIn(flag, result.stdout)


if __name__ == "__main__":
    unittest.main()
