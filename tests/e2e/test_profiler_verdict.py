"""A verdict from the snapshots alone (issue 12): with the collector off
(HANGWATCH_COLLECT=0) no debugger record exists, and `forensics report` decides from NCCL's
profiler events the watchdog keeps in each snapshot (analyzer/verdict/README.md). simnccl
reports proxy events for network links only, as NCCL does; SIMGPU_RANKS_PER_NODE groups the
ranks into nodes (simgpu/README.md)."""
import json
import shutil
import tempfile
from pathlib import Path

import report_jobs
from e2e_case import E2ECase


class SnapshotsOnly(E2ECase):
    def setUp(self):
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                self.skipTest(f"{binary} is not built")
        self.root = tempfile.mkdtemp(prefix="hangwatch-profiler-verdict-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def verdict(self, scenario, **env):
        job_dir, out, code = report_jobs.run_hung_job(scenario, self.root,
                                                      extra_env={"HANGWATCH_COLLECT": "0", **env})
        self.assertIsNotNone(code, f"the job never aborted\n{out[-3000:]}")
        nranks = report_jobs.SCENARIOS[scenario][0]
        ranks = job_dir / "ranks"
        for r in range(nranks):
            self.assertTrue((ranks / f"r{r:05d}.watchdog.json").exists(), out[-3000:])
            self.assertFalse((ranks / f"r{r:05d}.forensics.json").exists(), "the collector was off")
        code, stdout, stderr = report_jobs.report(job_dir, "json", ("--wait", "0"))
        self.assertEqual(code, 0, stderr)
        return json.loads(stdout)["verdict"]

    def test_eight_ranks_dead_link_named_from_the_snapshots(self):
        v = self.verdict("dead-link-8", SIMGPU_RANKS_PER_NODE="1")
        context = json.dumps(v, indent=1)
        self.assertEqual(v["kind"], "communication-hang", context)
        self.assertEqual(v["culprit_link"], {"from": 5, "to": 6}, context)
        self.assertEqual(v["source"], "profiler", context)
        self.assertTrue(v["confident"], context)
