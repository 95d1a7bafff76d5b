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


class VerdictCase(E2ECase):
    def setUp(self):
        for binary in (report_jobs.hangwatch_lib(), report_jobs.forensics_binary()):
            if not Path(binary).exists():
                self.skipTest(f"{binary} is not built")
        self.root = tempfile.mkdtemp(prefix="hangwatch-profiler-verdict-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def verdict(self, scenario, collect=False, ranks_per_node=None, **env):
        job_dir, out, code = report_jobs.run_hung_job(scenario, self.root, ranks_per_node=ranks_per_node,
                                                      extra_env={"HANGWATCH_COLLECT": "1" if collect else "0", **env})
        self.assertIsNotNone(code, f"the job never aborted\n{out[-3000:]}")
        nranks = report_jobs.SCENARIOS[scenario][0]
        ranks = job_dir / "ranks"
        for r in range(nranks):
            self.assertTrue((ranks / f"r{r:05d}.watchdog.json").exists(), out[-3000:])
            self.assertEqual((ranks / f"r{r:05d}.forensics.json").exists(), collect, "HANGWATCH_COLLECT")
        code, stdout, stderr = report_jobs.report(job_dir, "json", ("--wait", "60" if collect else "0"))
        self.assertEqual(code, 0, stderr)
        return json.loads(stdout)["verdict"]



class SnapshotsOnly(VerdictCase):
    def test_eight_ranks_dead_link_named_from_the_snapshots(self):
        v = self.verdict("dead-link-8", SIMGPU_RANKS_PER_NODE="1")
        context = json.dumps(v, indent=1)
        self.assertEqual(v["kind"], "communication-hang", context)
        self.assertEqual(v["culprit_link"], {"from": 5, "to": 6}, context)
        self.assertEqual(v["source"], "profiler", context)
        self.assertTrue(v["confident"], context)


class TwoNodes(VerdictCase):
    """8 ranks on two machines, node-0 (ranks 0-3) and node-1 (4-7): each rank gets its own
    hostname (launchers/as_node.py), so simnccl groups them into nodes by hostname as NCCL
    does. The ring 0 -> ... -> 7 -> 0 crosses the network at 3 -> 4 and 7 -> 0 only; the
    links inside a node are P2P and report nothing to the profiler. NCCL's cost model would run
    this AllReduce on two nodes as a tree; these jobs set NCCL_ALGO=Ring to follow the ring (the
    tree's verdicts: tests/e2e/verdict_matrix.py)."""

    def setUp(self):
        super().setUp()
        if not report_jobs.can_run_as_nodes():
            self.skipTest("a rank cannot take a hostname of its own here (needs root for a UTS namespace)")

    def two_nodes(self, scenario, collect=False):
        v = self.verdict(scenario, collect=collect, ranks_per_node=4, NCCL_ALGO="Ring")
        return v, json.dumps(v, indent=1)

    def test_dead_network_link_named_from_the_plugin(self):
        v, context = self.two_nodes("dead-link-8-3to4")
        self.assertEqual(v["kind"], "communication-hang", context)
        self.assertEqual(v["culprit_link"], {"from": 3, "to": 4}, context)
        self.assertEqual(v["source"], "profiler", context)
        self.assertTrue(v["confident"], context)
        self.assertIn("node-0", v["headline"], context)
        self.assertIn("node-1", v["headline"], context)

    def test_dead_nic_named_with_the_link_it_stopped(self):
        # node-0's mlx5_3 stops: the ring's 3 -> 4 between nodes delivers nothing. The debugger
        # reads each end's net device from the NET connection, so the verdict names the link and
        # both ends' NICs (text, JSON, HTML); NCCL's profiler knows no NIC.
        v = self.verdict("dead-nic-8", collect=True, ranks_per_node=4, NCCL_ALGO="Ring")
        context = json.dumps(v, indent=1)
        self.assertEqual(v["kind"], "communication-hang", context)
        self.assertEqual(v["culprit_link"], {"from": 3, "to": 4}, context)
        self.assertTrue(v["confident"], context)
        self.assertEqual(v["culprit_link_nics"], [
            {"rank": 3, "end": "send", "host": "node-0", "index": 3, "device": "mlx5_3", "port": 1,
             "source": "debugger"},
            {"rank": 4, "end": "recv", "host": "node-1", "index": 4, "device": "mlx5_4", "port": 1,
             "source": "debugger"}], context)
        self.assertTrue(any("node-0's mlx5_3 port 1" in s for s in v["next_steps"]), context)
        job_dir = Path(self.root) / report_jobs.JOB_ID
        code, text, err = report_jobs.report(job_dir, "text", ("--wait", "0"))
        self.assertEqual(code, 0, err)
        self.assertIn("sending NIC: rank 3 on node-0: mlx5_3 port 1", text)
        code, html, err = report_jobs.report(job_dir, "html", ("--wait", "0"))
        self.assertEqual(code, 0, err)
        self.assertIn("node-0's mlx5_3 port 1", html)

    def test_dead_nic_named_without_the_debugger_from_nccls_info_lines(self):
        # The same NIC with the collector off: NCCL's profiler names the link, and NCCL's own INFO
        # line at each end's connection set-up ("Channel .. : 3[3] -> 4[0] [send] via NET/IB/3"),
        # which the watchdog had NCCL write node-local (the job left NCCL_DEBUG unset), the NIC.
        v, context = self.two_nodes("dead-nic-8")
        self.assertEqual(v["kind"], "communication-hang", context)
        self.assertEqual(v["culprit_link"], {"from": 3, "to": 4}, context)
        self.assertEqual(v["source"], "profiler", context)
        self.assertTrue(v["confident"], context)
        self.assertEqual(v["culprit_link_nics"], [
            {"rank": 3, "end": "send", "host": "node-0", "index": 3, "device": "mlx5_3", "port": 1,
             "source": "nccl-info"},
            {"rank": 4, "end": "recv", "host": "node-1", "index": 4, "device": "mlx5_4", "port": 1,
             "source": "nccl-info"}], context)
        self.assertTrue(any("NCCL's own INFO line" in e for e in v["evidence"]), context)
        # The lines went to the watchdog's node-local file, not to the job's output.
        ranks = Path(self.root) / report_jobs.JOB_ID / "ranks"
        log = json.loads((ranks / "r00003.watchdog.json").read_text())["nccl_log"]
        self.assertTrue(log["file"].endswith(".log"), log)
        self.assertTrue(any("[send] via NET/IB/3" in line for line in log["lines"]), log)

    def test_a_jobs_own_nccl_debug_is_kept_and_the_nic_is_then_not_named(self):
        # NCCL_DEBUG=WARN is the job's choice: no INFO line is written, and the snapshot says why.
        v = self.verdict("dead-nic-8", ranks_per_node=4, NCCL_ALGO="Ring", NCCL_DEBUG="WARN")
        context = json.dumps(v, indent=1)
        self.assertEqual(v["culprit_link"], {"from": 3, "to": 4}, context)
        self.assertEqual(v["culprit_link_nics"], [], context)
        ranks = Path(self.root) / report_jobs.JOB_ID / "ranks"
        log = json.loads((ranks / "r00003.watchdog.json").read_text())["nccl_log"]
        self.assertEqual(log["unread"], "NCCL_DEBUG=WARN prints no INFO line", log)

    def test_dead_nic_carrying_both_links_of_a_rank_named_beside_it(self):
        # One rank per node: node-3's mlx5_3 carries both of rank 3's ring links. From the ring
        # that is rank 3 stopping, but its GPU posted steps that never arrived: the verdict names
        # the NIC beside the rank (a GPU that stops posts nothing and gets no NIC named).
        v = self.verdict("dead-nic-4", collect=True, ranks_per_node=1, NCCL_ALGO="Ring")
        context = json.dumps(v, indent=1)
        self.assertEqual(v["kind"], "communication-hang", context)
        self.assertEqual(v["culprit_ranks"], [3], context)
        self.assertEqual({(n["host"], n["device"], n["port"]) for n in v["culprit_link_nics"]},
                         {("node-3", "mlx5_3", 1)}, context)
        self.assertIn("node-3's mlx5_3 port 1: that NIC is as likely", v["headline"], context)

    def test_dead_link_inside_a_node_narrowed_to_its_node_without_the_debugger(self):
        v, context = self.two_nodes("dead-link-8")  # 5 -> 6, inside node-1
        self.assertEqual(v["kind"], "inconclusive", context)
        self.assertFalse(v["confident"], context)
        self.assertIsNone(v["culprit_link"], context)
        self.assertIn("no per-link data for links inside a node", v["reason"], context)
        self.assertIn("node-1", v["reason"], context)
        self.assertEqual([s["ranks"] for s in v["suspects"]], [[4, 5, 6, 7]], context)

    def test_dead_link_inside_a_node_named_from_the_debugger(self):
        v, context = self.two_nodes("dead-link-8", collect=True)
        self.assertEqual(v["kind"], "communication-hang", context)
        self.assertEqual(v["culprit_link"], {"from": 5, "to": 6}, context)
        self.assertEqual(v["source"], "debugger and profiler", context)
        self.assertTrue(v["confident"], context)
        self.assertTrue(any("agree" in e and "ranks 4, 5, 6 and 7" in e for e in v["evidence"]), context)

    def test_dead_rank_inside_a_node_narrowed_to_its_node_without_the_debugger(self):
        # NCCL's profiler sees no link inside a node, and nothing it reports tells which GPU there
        # stopped (the host returns from the call; every waiting rank's kernel channels stay open).
        v, context = self.two_nodes("dead-rank-8")  # rank 5, inside node-1
        self.assertEqual(v["kind"], "inconclusive", context)
        self.assertFalse(v["confident"], context)
        self.assertEqual(v["culprit_ranks"], [], context)
        self.assertIn([4, 5, 6, 7], [s["ranks"] for s in v["suspects"]], context)
