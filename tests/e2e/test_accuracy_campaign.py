"""bench/accuracy.py's own logic, without jobs: every class makes cases that can run (the
injected link is one its algorithm uses, the shape is 4-16 ranks on 1-4 whole nodes), the
random parameters cover every value, and the score is right, hedged or wrong (a miss is wrong)."""
import random
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import accuracy  # noqa: E402
from test_verdict_matrix import verdict  # noqa: E402


def cases(name, n=200, seed=1):
    rng = random.Random(seed)
    return [accuracy.CLASSES[name][0](rng) for _ in range(n)]


class Classes(unittest.TestCase):
    def test_there_are_at_least_ten_classes_and_each_makes_runnable_cases(self):
        self.assertGreaterEqual(len(accuracy.CLASSES), 10)
        for name in accuracy.CLASSES:
            for c in cases(name):
                self.assertTrue(4 <= c.job_ranks <= 16, c.describe())
                self.assertEqual(c.nranks % c.nodes, 0, c.describe())
                self.assertIn(c.truth["kind"],
                              {"communication-hang", "non-communication-hang", "collective-mismatch", "slowdown"})
                for t in [c.truth, *c.alternatives]:
                    if "nic" in t:
                        host, device = t["nic"]
                        a, b = t["link"]
                        self.assertIn(f"dead-nic={host}:{device}@op={c.op}", c.faults, c.describe())
                        self.assertNotEqual(a // c.per_node, b // c.per_node, "a NIC carries links between nodes")
                        # The NIC is that of the link's sender or receiver: rank r's is mlx5_<r % 8> on its node.
                        self.assertIn((host, device), [(f"node-{r // c.per_node}", f"mlx5_{r % 8}") for r in (a, b)])
                        self.assertEqual(b, (a + 1) % c.nranks, c.describe())
                    elif "link" in t:
                        a, b = t["link"]
                        self.assertTrue(0 <= a < c.job_ranks and 0 <= b < c.job_ranks and a != b, c.describe())
                        self.assertTrue(any(f"->{b}@" in f or f"->{b}:" in f for f in c.faults), c.describe())
                    else:
                        self.assertTrue(0 <= t["rank"] < c.job_ranks, c.describe())

    def test_ring_classes_break_a_ring_link_and_the_tree_class_a_tree_link(self):
        for name in ("dead-link", "slow-then-dead-link", "two-faults", "graph-replay", "nonblocking", "lost-credit",
                     "socket"):
            for c in cases(name):
                a, b = c.truth["link"]
                self.assertEqual(b, (a + 1) % c.nranks, c.describe())
        for c in cases("socket"):
            a, b = c.truth["link"]
            self.assertNotEqual(a // c.per_node, b // c.per_node, "Socket matters between nodes: " + c.describe())
        for c in cases("tree"):
            a, b = c.truth["link"]
            self.assertGreater(c.nodes, 1)
            # A node's head up to node 0's head, or a head to the next rank of its node's chain.
            self.assertTrue((b == 0 and a == c.per_node) or (a % c.per_node == 0 and b == a + 1), c.describe())

    def test_the_tensor_parallel_class_breaks_a_link_of_one_groups_ring(self):
        wraps = 0
        for c in cases("tp", 40):
            t = int(c.args[c.args.index("--tp") + 1])
            self.assertEqual(c.nranks % t, 0, c.describe())
            self.assertTrue(t == c.per_node or (c.per_node == 1 and t == 2), c.describe())
            a, b = c.truth["link"]
            self.assertEqual(a // t, b // t, "inside one group: " + c.describe())
            self.assertEqual(b % t, (a % t + 1) % t, c.describe())
            wraps += b % t == 0
        self.assertGreater(wraps, 0)  # the group's wrap-around, which the world's ring does not use

    def test_the_random_parameters_cover_every_value(self):
        all_cases = [c for name in accuracy.CLASSES for c in cases(name, 40)]
        self.assertEqual({c.launcher for c in all_cases}, {*accuracy.LAUNCHERS, accuracy.SRUN_KEEP})
        # Slowdown jobs run to their end: "runs" is their mode, and theirs only.
        self.assertEqual({c.mode for c in all_cases}, {"abort", "wait", "runs"})
        self.assertEqual({c.mode == "runs" for c in all_cases}, {getattr(c, "slowdown", False) for c in all_cases})
        self.assertEqual({c.collector for c in all_cases}, {"on", "off"})
        self.assertEqual({c.nodes for c in all_cases}, set(accuracy.NODE_COUNTS))
        self.assertEqual(min(c.job_ranks for c in all_cases), 4)
        self.assertEqual(max(c.job_ranks for c in all_cases), 16)

    def test_a_forced_shape_and_collector_hold_for_every_class_that_allows_them(self):
        accuracy.FORCED.update(shape=(8, 2), collector="off")
        try:
            for name in ("tree", "tree-dead-gpu", "socket", "lost-credit", "graph-replay", "nonblocking"):
                for c in cases(name, 10):
                    self.assertEqual((c.nranks, c.nodes, c.collector), (8, 2, "off"), c.describe())
            for c in cases("pat", 5):  # one rank per node: its own shape
                self.assertEqual(c.per_node, 1, c.describe())
                self.assertEqual(c.collector, "off")
        finally:
            accuracy.FORCED.clear()

    def test_multi_gpu_jobs_are_processes_of_two_gpus_judged_in_gpu_ranks(self):
        drawn = cases("multi-gpu", 40)
        for c in drawn:
            self.assertEqual((c.program, c.gpus_per_process, c.nodes), ("device_ring", 2, 1), c.describe())
            self.assertEqual(c.dumps_expected, c.nranks, "one snapshot per process")
            self.assertIn("--devices", c.args)
            t = c.truth
            if "link" in t:
                self.assertEqual(t["link"][1], (t["link"][0] + 1) % c.job_ranks, c.describe())
                self.assertEqual(c.where(), "inside")
            # A fault on a process's second GPU is drawn: GPU ranks, not launcher ranks.
        self.assertTrue(any(max(t.get("link", (t.get("rank", 0),))) >= c.nranks
                            for c in drawn for t in [c.truth]))
        self.assertEqual({"--threads" in c.args for c in drawn}, {True, False})  # -t and -g shapes


    def test_a_rank_that_exits_runs_under_srun_that_keeps_the_others_and_is_expected_to_leave_no_dump(self):
        for c in cases("rank-exits"):
            self.assertEqual(c.launcher, accuracy.SRUN_KEEP, c.describe())
            self.assertEqual(c.dumps_expected, c.nranks - 1)
            self.assertEqual(c.args[c.args.index("--exit-rank") + 1], str(c.truth["rank"]))
        for c in cases("never-joins"):
            self.assertEqual(c.args[c.args.index("--stall-at-step") + 1], "init")
            self.assertEqual(c.dumps_expected, c.nranks)


    def test_pipeline_classes_run_a_tp_pp_dp_job_and_break_a_link_between_neighbouring_stages(self):
        for name in ("pp-dead-link", "pp-stuck-stage", "pp-skip"):
            for c in cases(name):
                t, p, d = c.pipe
                self.assertEqual(c.nranks, t * p * d, c.describe())
                self.assertEqual(c.args[c.args.index("--pp") + 1], str(p))
                self.assertEqual(c.args[c.args.index("--tp") + 1], str(t))
                if "link" in c.truth:
                    a, b = c.truth["link"]
                    # Megatron's layout: stage = rank // (TP * DP); the peer is one stage on.
                    self.assertEqual(abs(a - b), t * d, c.describe())
                    self.assertEqual(abs(a // (t * d) - b // (t * d)), 1, c.describe())
        self.assertIn("--no-verify", cases("pp-skip")[0].args)

    def test_slowdown_classes_slow_a_last_stage_rank_on_the_path_or_in_its_bubble(self):
        for name, where in (("pp-slow-critical", "forward"), ("pp-slow-absorbed", "bubble")):
            for c in cases(name):
                t, p, d = c.pipe
                self.assertEqual(d, 2, "the DP all-reduce ends each step: " + c.describe())
                r = c.truth["rank"]
                self.assertEqual(r // (t * d), p - 1, "a last-stage rank: " + c.describe())
                self.assertEqual(c.args[c.args.index("--extra-work-rank") + 1], str(r))
                self.assertEqual(c.args[c.args.index("--extra-work-in") + 1], where)
                self.assertEqual(c.truth["critical"], name == "pp-slow-critical")
                self.assertLess(accuracy.SLOW_FROM, c.steps)

    def test_the_new_algorithm_classes_run_where_nccl_runs_them(self):
        for c in cases("tree-dead-gpu"):
            self.assertGreater(c.nodes, 1, c.describe())
            self.assertEqual(c.env["NCCL_ALGO"], "allreduce:tree")
            self.assertIn("rank", c.truth)
        for c in cases("pat"):
            # NCCL runs PAT with one rank per node, for AllGather and ReduceScatter.
            self.assertEqual(c.nodes, c.nranks, c.describe())
            self.assertIn("allgather:pat", c.env["NCCL_ALGO"])
            if "link" in c.truth:
                a, b = c.truth["link"]
                self.assertEqual(b, (a + 1) % c.nranks, c.describe())
        self.assertEqual({"link" in c.truth for c in cases("pat")}, {True, False})

    def test_where_a_fault_is_splits_links_inside_and_between_nodes_from_rank_faults(self):
        wheres = {c.where() for c in cases("dead-link")}
        self.assertEqual(wheres, {"inside", "between"})
        self.assertEqual({c.where() for c in cases("dead-gpu")}, {"rank"})
        for c in cases("dead-link"):
            a, b = c.truth["link"]
            self.assertEqual(c.where(), "between" if a // c.per_node != b // c.per_node else "inside")


class NotRun(unittest.TestCase):
    def test_a_fault_that_never_took_effect_is_found_in_the_jobs_output(self):
        out = ("ring_train rank=3 OK steps=60\n"
               "simgpu: fault 'dead-link=3->4@op=8' never took effect: from op 8 on, rank 3 sent nothing to rank 4: "
               "op 8 ran TREE, whose connections from rank 3 go to rank(s) 2\n")
        self.assertEqual(len(accuracy.never_fired(out)), 1)
        self.assertEqual(accuracy.never_fired("hangwatch[rank 1]: hang detected\n"), [])

    def test_the_table_splits_by_collector_and_where(self):
        results = [{"outcome": "right", "seconds": 1.0, "collector": "on", "where": "between"},
                   {"outcome": "hedged", "seconds": 2.0, "collector": "off", "where": "inside"},
                   {"outcome": "wrong", "seconds": None, "collector": "off", "where": "inside"}]
        r = accuracy.row("x", results, 2)
        self.assertEqual((r["right"], r["hedged"], r["wrong"], r["not_run"]), (1, 1, 1, 2))
        self.assertEqual((r["collector_on"], r["collector_off"]), ("1/0/0", "0/1/1"))
        self.assertEqual((r["where_inside"], r["where_between"], r["where_rank"]), ("0/1/1", "1/0/0", ""))
        self.assertIn("| x | 3 | 1 | 1 | 1 | 2 | 1/0/0 | 0/1/1 | 0/1/1 | 1/0/0 |  | 1.5 |", accuracy.table([r]))


class SlowdownScore(unittest.TestCase):
    def analysis(self, causes, findings=(), absorbed=()):
        return {"findings": [{"ranks": f} for f in findings],
                "critical_path": {"causes": [{"rank": r, "ranks": rs, "evidence": ["a", "b"]} for r, rs in causes],
                                  "absorbed": [{"rank": r} for r in absorbed]}}

    def test_the_rank_or_its_stage_named_is_right_another_wrong_nothing_a_miss(self):
        c = cases("pp-slow-critical", 1, seed=3)[0]
        t, p, d = c.pipe
        r = c.truth["rank"]
        stage = [x for x in range(c.nranks) if x // (t * d) == r // (t * d)]
        other = (r + t * d) % c.nranks
        self.assertEqual(accuracy.slowdown_judge(self.analysis([(r, [r])]), c)[:3:2], ("right", "rank"))
        self.assertEqual(accuracy.slowdown_judge(self.analysis([(None, stage)]), c)[0], "right")
        self.assertEqual(accuracy.slowdown_judge(self.analysis([(other, [other])]), c)[0], "wrong")
        self.assertEqual(accuracy.slowdown_judge(self.analysis([]), c)[0], "hedged")
        # The baseline's call: its findings' ranks.
        self.assertEqual(accuracy.slowdown_judge(self.analysis([], findings=[[r]]), c)[3], "rank")

    def test_on_the_absorbed_class_any_cause_is_wrong_and_scores_count_it_a_false_positive(self):
        c = cases("pp-slow-absorbed", 1, seed=3)[0]
        r = c.truth["rank"]
        self.assertEqual(accuracy.slowdown_judge(self.analysis([], absorbed=[r]), c)[0], "right")
        self.assertEqual(accuracy.slowdown_judge(self.analysis([(r, [r])]), c)[0], "wrong")
        results = [{"path_call": "rank", "critical": True}, {"path_call": "nothing", "critical": True},
                   {"path_call": "nothing", "critical": False}, {"path_call": "other", "critical": False}]
        self.assertEqual(accuracy.scores(results, "path_call", None), {"tp": 1, "fp": 1, "fn": 1})


class Score(unittest.TestCase):
    def setUp(self):
        self.case = cases("two-faults", 1)[0]
        self.first, self.second = self.case.truth["link"], self.case.alternatives[0]["link"]

    def test_either_of_two_faults_named_confidently_is_right(self):
        for link in (self.first, self.second):
            outcome, _ = accuracy.judge(verdict("communication-hang", True, link, link), self.case)
            self.assertEqual(outcome, "right")

    def test_a_miss_or_a_confident_other_culprit_is_wrong(self):
        other = ((self.first[0] + 3) % self.case.nranks, (self.first[0] + 4) % self.case.nranks)
        if other in (self.first, self.second):
            other = ((other[0] + 5) % self.case.nranks, (other[0] + 6) % self.case.nranks)
        self.assertEqual(accuracy.judge(verdict("communication-hang", True, other, other), self.case)[0], "wrong")
        self.assertEqual(accuracy.judge(verdict("unknown", False), self.case)[0], "wrong")
        self.assertEqual(accuracy.judge(verdict("communication-hang", False, suspects=[(self.second, self.second)]), self.case)[0],
                         "hedged")


if __name__ == "__main__":
    unittest.main()
