"""Node summaries (nodes/<host>.json): the last collector of each node merges its ranks' files,
and `forensics report` reads one file per node. Jobs on several nodes (launchers/as_node.py),
abort mode, collectors on: each node's summary is written by the job itself, and the report
from the summaries equals, byte for byte and in every format, the report from the rank files
(--flat), with every summary present, with one missing, with one damaged, and with one
written at its deadline by the node's waiter while a rank was still collecting."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs

FORMATS = ("json", "text", "html")


def report(job_dir, fmt, *more):
    r = subprocess.run([report_jobs.forensics_binary(), "report", str(job_dir), "--format", fmt, "--wait", "0",
                        "--no-save", *more], capture_output=True, text=True, timeout=240)
    if r.returncode != 0:
        raise AssertionError(f"forensics report {' '.join(more)} exited {r.returncode}: {r.stderr}")
    return r.stdout, r.stderr


class NodeSummaries(unittest.TestCase):
    def setUp(self):
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                self.skipTest(f"{binary} is not built")
        if not report_jobs.can_run_as_nodes():
            self.skipTest("jobs on several nodes need a UTS namespace per rank (root)")
        self.root = Path(tempfile.mkdtemp(prefix="hangwatch-node-summary-"))
        self.addCleanup(shutil.rmtree, self.root, True)

    def hung(self, scenario, ranks_per_node, **env):
        job_dir, out, code = report_jobs.run_hung_job(scenario, self.root, ranks_per_node=ranks_per_node,
                                                      extra_env={"NCCL_ALGO": "Ring", **env})
        self.assertIsNotNone(code, f"the job never aborted\n{out[-3000:]}")
        nranks = report_jobs.SCENARIOS[scenario][0]
        nodes = (nranks + ranks_per_node - 1) // ranks_per_node
        # The last collector of each node wrote its summary before the job could exit.
        summaries = sorted((job_dir / "nodes").glob("*.json"))
        self.assertEqual(len(summaries), nodes, f"{summaries}\n{out[-3000:]}")
        covered = []
        for path in summaries:
            s = json.loads(path.read_text())
            self.assertEqual(s["lacks"], [], path.name)
            self.assertEqual(len(s["files"]), len(s["covers"]))
            self.assertTrue(s["classes"] and s["tree"], path.name)
            covered += s["covers"]
        self.assertEqual(sorted(covered), list(range(nranks)))
        return job_dir

    def assert_same_as_flat(self, job_dir, used=None):
        for fmt in FORMATS:
            merged, err = report(job_dir, fmt)
            flat, _ = report(job_dir, fmt, "--flat")
            self.assertEqual(merged, flat, f"{fmt}: the report from the node summaries differs from the flat one")
        return err

    def check_scenario(self, scenario, ranks_per_node, culprit_link=None, culprit_ranks=None):
        job_dir = self.hung(scenario, ranks_per_node)
        self.assert_same_as_flat(job_dir)
        v = json.loads(report(job_dir, "json")[0])["verdict"]
        if culprit_link:
            self.assertEqual(v["culprit_link"], culprit_link, json.dumps(v, indent=1))
        if culprit_ranks:
            self.assertEqual(v["culprit_ranks"], culprit_ranks, json.dumps(v, indent=1))
        summaries = sorted((job_dir / "nodes").glob("*.json"))

        # One node's summary missing: that node's ranks are read from their own files.
        missing = self.root / "missing"
        shutil.copytree(job_dir, missing, copy_function=os.link)
        (missing / "nodes" / summaries[0].name).unlink()
        self.assert_same_as_flat(missing)

        # One damaged (cut short, as a full disk leaves a file written in place): not used, said.
        damaged = self.root / "damaged"
        shutil.copytree(job_dir, damaged)
        path = damaged / "nodes" / summaries[-1].name
        text = path.read_text()
        path.write_text(text[:len(text) // 2])
        err = self.assert_same_as_flat(damaged)
        self.assertIn(f"{path.name} not used", err)

    def test_dead_link_between_nodes(self):
        self.check_scenario("dead-link-8-3to4", 4, culprit_link={"from": 3, "to": 4})

    def test_dead_rank_on_the_second_node(self):
        self.check_scenario("dead-rank-8", 4, culprit_ranks=[5])

    def test_host_loop_on_three_nodes(self):
        self.check_scenario("host-loop-6", 2, culprit_ranks=[4])

    def test_a_node_whose_rank_still_collects_is_summarised_at_the_deadline(self):
        job_dir = self.hung("dead-link-8-3to4", 4)
        # As if rank 6's collector had been killed mid-collection: its state says collecting, with a
        # deadline 3 s away. The node's waiter writes the summary when it passes, lacking rank 6.
        work = self.root / "late"
        shutil.copytree(job_dir, work)
        shutil.rmtree(work / "nodes")
        state_path = work / "ranks" / "r00006.state.json"
        state = json.loads(state_path.read_text())
        state.update(state="collecting", deadline_unix_s=time.time() + 3, collector_pid=0)
        state_path.write_text(json.dumps(state))
        start = time.monotonic()
        r = subprocess.run([report_jobs.forensics_binary(), "node-summary", str(work), "--ranks", "4-7", "--host",
                            "node-1", "--wait-until", str(time.time() + 60)], capture_output=True, text=True,
                           timeout=90)
        waited = time.monotonic() - start
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(waited, 2, "it did not wait for rank 6's deadline")
        self.assertLess(waited, 30, "it waited past rank 6's deadline")
        s = json.loads((work / "nodes" / "node-1.json").read_text())
        self.assertEqual((s["covers"], s["lacks"]), ([4, 5, 7], [6]))
        # Rank 6 past its deadline is read from its files: the report is the flat one.
        self.assert_same_as_flat(work)

    def test_usage_errors(self):
        f = report_jobs.forensics_binary()
        for args, said in ((["node-summary"], "missing <job-dir>"),
                           (["node-summary", str(self.root)], "either --ranks or --all"),
                           (["node-summary", str(self.root), "--ranks", "x"], "--ranks wants ranks"),
                           (["node-summary", str(self.root), "--all", "--host", "h"], "--all takes neither")):
            r = subprocess.run([f, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(said, r.stderr)
        r = subprocess.run([f, "node-summary", str(self.root / "nothing"), "--ranks", "0-3"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no ranks/ folder", r.stderr)
        r = subprocess.run([f, "node-summary", "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("nodes/<host>.json", r.stdout)


if __name__ == "__main__":
    unittest.main()
