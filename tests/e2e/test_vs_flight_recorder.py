"""bench/vs_flight_recorder.py at --runs 1 (issue 42): the same hung PyTorch job judged by
PyTorch's own Flight Recorder analyzer and by hangwatch, one run per class. The classes
test_torch.py does not already run as cases of its own: one collective more on one rank, one
of another size, a rank that never joins the process group, and a rank that exits. hangwatch
is never wrong, and it is right wherever fr_trace is right."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from harness import SOURCE_DIR
from test_torch import TorchCase, build_dir

CLASSES = ["extra-collective", "size-mismatch", "never-joins", "rank-exits"]


class SideBySide(TorchCase):
    def test_hangwatch_is_never_wrong_and_right_wherever_flight_recorder_is(self):
        with tempfile.TemporaryDirectory(prefix="hangwatch-vsfr-ci-") as out:
            results = Path(out) / "runs.json"
            # The bench draws each fault from the clock's seed and prints it; HANGWATCH_VSFR_SEED
            # replays one.
            seed = ["--seed", os.environ["HANGWATCH_VSFR_SEED"]] if os.environ.get("HANGWATCH_VSFR_SEED") else []
            run = subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "vs_flight_recorder.py"), "--build",
                                  str(build_dir()), "--runs", "1", "--classes", ",".join(CLASSES), "--json",
                                  str(results), *seed], capture_output=True, text=True, timeout=900)
            print(run.stdout[-4000:], run.stderr[-2000:])
            self.assertEqual(run.returncode, 0, run.stderr[-2000:])
            runs = json.loads(results.read_text())["runs"]
        self.assertEqual(sorted(runs), sorted(CLASSES))
        for name, results in runs.items():
            for r in results:
                hw, fr = r["hangwatch"], r["fr_trace"]
                with self.subTest(cls=name, case=r["case"]):
                    self.assertNotEqual(hw["outcome"], "wrong", f"{name}: hangwatch {hw['why']} ({hw['said']})")
                    if fr["outcome"] == "right":
                        self.assertEqual(hw["outcome"], "right", f"{name}: fr_trace {fr['why']}, hangwatch {hw['why']}")
        # Where a run hung, hangwatch named the rank that was made to misbehave.
        for name in ("extra-collective", "size-mismatch", "never-joins"):
            r = runs[name][0]
            if name == "never-joins" and r["truth"]["rank"] == 0:
                # Rank 0 publishes the ncclUniqueId through PyTorch's store: without it the others
                # fail there after PyTorch's timeout, and nothing hangs.
                self.assertEqual(r["hangwatch"]["outcome"], "no-hang", r)
                continue
            self.assertEqual(r["hangwatch"]["outcome"], "right", r)


if __name__ == "__main__":
    unittest.main()
