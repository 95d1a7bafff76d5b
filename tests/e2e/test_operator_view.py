"""What the operator sees (issue #28) on a 2-node job (8 ranks as node-0 and node-1, UTS
namespaces) with a dead network link 3 -> 4 and the collector off by configuration: the report
run on the dump root finds the job, shows the nodes and which links cross the network, says in
one sentence that the collector was off, and every file it and the ranks wrote is group-readable,
not world-readable."""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import report_jobs
import report_png
from e2e_case import E2ECase
from harness import MpiJob

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NODE_SHADES = [(0xF6, 0xEF, 0xE2), (0xEE, 0xF3, 0xFB)]  # html_report_writer.cc: nodeArcs
CULPRIT_RGB = (0xFF, 0x00, 0x00)  # HtmlReportWriter::kCulpritColour


class TwoNodeJobWithTheCollectorOff(E2ECase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="hangwatch-operator-")
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                raise unittest.SkipTest(f"{binary} is not built")
        if not report_jobs.can_run_as_nodes():
            raise unittest.SkipTest("ranks cannot take hostnames of their own here (UTS namespaces need root)")
        env = report_jobs.watchdog_env(cls.root, faults="dead-link=3->4@op=8")
        # The ring's link between the nodes (NCCL's cost model would take the tree on two nodes).
        env.update({"HANGWATCH_ON_HANG": "abort", "HANGWATCH_COLLECT": "0", "NCCL_ALGO": "Ring"})
        env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
        argv = [sys.executable, str(report_jobs.AS_NODE), "4", "--", *report_jobs.job_argv("ring_train", [], 40)]
        with MpiJob(8, argv, env=env) as job:
            cls.code = job.wait_exit(240)
            cls.out = job.output()
        cls.job_dir = Path(cls.root) / report_jobs.JOB_ID
        r = subprocess.run([report_jobs.forensics_binary(), "report", cls.root, "--format", "json"],
                           capture_output=True, text=True, timeout=240)
        cls.report_code, cls.stderr = r.returncode, r.stderr
        cls.rep = json.loads(r.stdout) if r.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, True)

    def test_the_dump_root_reports_the_job_in_it(self):
        self.assertIsNotNone(self.code, self.out[-3000:])
        self.assertEqual(self.report_code, 0, self.stderr)
        self.assertIn("dump root holding one job", self.stderr)
        v = self.rep["verdict"]
        self.assertEqual(v["culprit_link"], {"from": 3, "to": 4}, json.dumps(v, indent=1))
        self.assertTrue(v["confident"])
        self.assertTrue((self.job_dir / "report" / "report.html").exists())

    def test_nodes_are_shown_with_the_verdicts_part_in_them(self):
        self.assertEqual([(n["host"], n["ranks_text"]) for n in self.rep["nodes"]],
                         [("node-0", "0-3"), ("node-1", "4-7")])
        text = (self.job_dir / "report" / "report.txt").read_text()
        self.assertIn("node-0: ranks 0-3  <- culprit link 3 -> 4 leaves this node", text)
        self.assertIn("node-1: ranks 4-7  <- culprit link 3 -> 4 enters this node", text)

    def test_a_collector_that_was_off_is_one_sentence_not_a_missing_dump_per_rank(self):
        self.assertEqual(self.rep["ranks_partial"], [])
        self.assertEqual(self.rep["ranks_missing"], [])
        off = [p for p in self.rep["problems"] if "collector was off" in p]
        self.assertEqual(len(off), 1, self.rep["problems"])
        self.assertIn("rank(s) 0-7", off[0])
        self.assertNotIn("forensics dump missing", (self.job_dir / "report" / "report.txt").read_text())

    def test_dumps_and_reports_are_group_readable_not_world_readable(self):
        for path in [self.job_dir, *self.job_dir.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            want = 0o750 if path.is_dir() else 0o640
            self.assertEqual(mode, want, f"{path}: {oct(mode)}")

    def test_the_html_ring_draws_both_nodes_and_the_culprit(self):
        if not CHROMIUM:
            self.skipTest("chromium is not installed (scripts/install-deps.sh installs it)")
        html = self.job_dir / "report" / "report.html"
        page = html.read_text()
        self.assertEqual(page.count('class="node"'), 2)
        self.assertEqual(page.count('class="net"'), 2)  # 3 -> 4 and 7 -> 0 cross the network
        png = Path(self.root) / "ring.png"
        r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--no-first-run", "--disable-background-networking", f"--screenshot={png}",
                            "--window-size=1200,1400", html.as_uri()],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": self.root})
        self.assertTrue(png.exists(), r.stderr[-2000:])
        counts, distinct, size = report_png.colour_counts(png, [*NODE_SHADES, CULPRIT_RGB])
        for shade in NODE_SHADES:
            self.assertGreater(counts[shade], 500, f"node shade {shade} not drawn ({size}, {distinct} colours)")
        self.assertGreater(counts[CULPRIT_RGB], 50)


if __name__ == "__main__":
    unittest.main()
