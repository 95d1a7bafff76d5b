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
                self.assertTrue(4 <= c.nranks <= 16, c.describe())
                self.assertEqual(c.nranks % c.nodes, 0, c.describe())
                self.assertIn(c.truth["kind"], {"communication-hang", "non-communication-hang", "collective-mismatch"})
                for t in [c.truth, *c.alternatives]:
                    if "link" in t:
                        a, b = t["link"]
                        self.assertTrue(0 <= a < c.nranks and 0 <= b < c.nranks and a != b, c.describe())
                        self.assertTrue(any(f"->{b}@" in f or f"->{b}:" in f for f in c.faults), c.describe())
                    else:
                        self.assertTrue(0 <= t["rank"] < c.nranks, c.describe())

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

    def test_the_random_parameters_cover_every_value(self):
        all_cases = [c for name in accuracy.CLASSES for c in cases(name, 40)]
        self.assertEqual({c.launcher for c in all_cases}, {*accuracy.LAUNCHERS, accuracy.SRUN_KEEP})
        self.assertEqual({c.mode for c in all_cases}, {"abort", "wait"})
        self.assertEqual({c.collector for c in all_cases}, {"on", "off"})
        self.assertEqual({c.nodes for c in all_cases}, set(accuracy.NODE_COUNTS))
        self.assertEqual(min(c.nranks for c in all_cases), 4)
        self.assertEqual(max(c.nranks for c in all_cases), 16)


    def test_a_rank_that_exits_runs_under_srun_that_keeps_the_others_and_is_expected_to_leave_no_dump(self):
        for c in cases("rank-exits"):
            self.assertEqual(c.launcher, accuracy.SRUN_KEEP, c.describe())
            self.assertEqual(c.dumps_expected, c.nranks - 1)
            self.assertEqual(c.args[c.args.index("--exit-rank") + 1], str(c.truth["rank"]))
        for c in cases("never-joins"):
            self.assertEqual(c.args[c.args.index("--stall-at-step") + 1], "init")
            self.assertEqual(c.dumps_expected, c.nranks)


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
