"""The job's own NCCL profiler plugin, named only in an NCCL conf file, keeps working
under the watchdog (issue 16): libhangwatch.so takes NCCL_PROFILER_PLUGIN's place, loads
the job's plugin behind itself and forwards every callback, and still names a slow link
from the proxy steps."""
import os
from pathlib import Path

from test_analyze import AnalyzeCase


class JobProfilerPlugin(AnalyzeCase):
    def test_a_profiler_from_the_nccl_conf_file_still_gets_its_events_and_the_slow_link_is_named(self):
        plugin = os.environ.get("RECORDING_PROFILER")
        if not plugin or not Path(plugin).exists():
            self.skipTest("the recording profiler fixture is not built")
        conf = Path(self.dump_root) / "nccl.conf"
        conf.write_text(f"# the site's NCCL settings\nNCCL_PROFILER_PLUGIN={plugin}\n")
        out = Path(self.dump_root) / "recording.txt"
        job_dir = self.run_job("chain", faults="slow-link=1->2:0.3", steps=30,
                               NCCL_CONF_FILE=str(conf), RECORDING_PROFILER_OUT=str(out))
        lines = out.read_text().splitlines() if out.exists() else []
        # One line per communicator each rank finalized: the job's plugin saw proxy steps on every rank.
        self.assertGreaterEqual(len(lines), 4, lines)
        steps = [int(line.split("steps=")[1]) for line in lines]
        self.assertTrue(all(s > 0 for s in steps), lines)
        report = self.analyze(job_dir)
        kinds = [(f["kind"], f["link"]) for f in report["findings"]]
        self.assertIn(("slow-link", {"from": 1, "to": 2}), kinds, report)
