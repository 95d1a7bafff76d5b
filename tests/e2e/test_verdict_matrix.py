"""verdict_matrix.py's own logic, without jobs: the cases cover every pair of values, the CI
slice every value, and the judge tells right, hedged, missed and wrong apart."""
import contextlib
import io
import itertools
import sys
import unittest

import verdict_matrix as vm


def verdict(kind, confident, ranks=(), link=None, suspects=(), link_ranks="global"):
    return {"kind": kind, "confident": confident, "culprit_ranks": list(ranks),
            "culprit_link": {"from": link[0], "to": link[1]} if link else None, "culprit_link_ranks": link_ranks,
            "suspects": [{"ranks": list(r[0]), "link": {"from": r[1][0], "to": r[1][1]}} if isinstance(r, tuple)
                         else {"ranks": list(r), "link": None} for r in suspects]}


class Cover(unittest.TestCase):
    def test_every_pair_of_values_that_can_run_is_in_some_case(self):
        cases = vm.pairwise_cases()
        names = list(vm.DIMENSIONS)
        runnable = [dict(zip(names, v)) for v in itertools.product(*vm.DIMENSIONS.values())]
        runnable = [c for c in runnable if vm.applies(c)]
        for a, b in itertools.combinations(names, 2):
            for va, vb in itertools.product(vm.DIMENSIONS[a], vm.DIMENSIONS[b]):
                can = any(c[a] == va and c[b] == vb for c in runnable)
                self.assertEqual(any(c[a] == va and c[b] == vb for c in cases), can, f"{a}={va} {b}={vb}")
        # NCCL runs PAT with one rank per node, for AllGather and ReduceScatter only.
        self.assertFalse(any(c["algo"] == "PAT" and c["nodes"] == "2x4" for c in runnable))
        self.assertTrue(all(vm.applies(c) for c in cases + vm.EDGE_CASES))
        self.assertTrue(any(c["algo"] == "PAT" for c in cases))
        full = 1
        for values in vm.DIMENSIONS.values():
            full *= len(values)
        self.assertLess(len(cases), full // 10)

    def test_the_ci_slice_holds_every_value(self):
        chosen = vm.ci_slice(vm.pairwise_cases())
        for name, values in vm.DIMENSIONS.items():
            self.assertEqual({c[name] for c in chosen}, set(values), name)
        self.assertLessEqual(len(chosen), max(len(v) for v in vm.DIMENSIONS.values()) + 1)


class Judge(unittest.TestCase):
    link = {"kind": "communication-hang", "link": (2, 3)}
    rank = {"kind": "communication-hang", "rank": 5}

    def test_the_named_link_or_rank_is_right(self):
        self.assertEqual(vm.judge(verdict("communication-hang", True, [2, 3], (2, 3)), self.link)[0], "right")
        self.assertEqual(vm.judge(verdict("communication-hang", True, [5]), self.rank)[0], "right")

    def test_a_confident_other_culprit_or_kind_is_wrong(self):
        self.assertEqual(vm.judge(verdict("communication-hang", True, [3, 4], (3, 4)), self.link)[0], "wrong")
        self.assertEqual(vm.judge(verdict("communication-hang", True, [3]), self.link)[0], "wrong")
        self.assertEqual(vm.judge(verdict("collective-mismatch", True, [2]), self.link)[0], "wrong")
        self.assertEqual(vm.judge(verdict("non-communication-hang", True, [5]), self.rank)[0], "wrong")
        # A link in communicator ranks is not taken for global ranks.
        self.assertEqual(vm.judge(verdict("communication-hang", True, [2, 3], (2, 3), link_ranks="communicator"),
                                  self.link)[0], "wrong")

    def test_not_confident_is_hedged_only_with_the_culprit_among_the_suspects(self):
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[[0, 1, 2, 3]]), self.link)[0], "hedged")
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[[4, 5, 6, 7]]), self.rank)[0], "hedged")
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[[0, 1]]), self.rank)[0], "missed")
        self.assertEqual(vm.judge(verdict("inconclusive", False), self.link)[0], "missed")
        # A suspected link that only shares a rank with the faulty one is not it.
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[([1, 2], (1, 2))]), self.link)[0], "missed")
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[([2, 3], (2, 3))]), self.link)[0], "hedged")
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[([2], (2, None))]), self.link)[0], "hedged")
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[([3], (3, None))]), self.link)[0], "missed")
        self.assertEqual(vm.judge(verdict("inconclusive", False, suspects=[([4, 5], (4, 5))]), self.rank)[0], "hedged")


class Faults(unittest.TestCase):
    def test_each_case_injects_its_fault_where_the_truth_says(self):
        for case in vm.pairwise_cases() + vm.EDGE_CASES:
            faults, args, truth = vm.fault_of(case)
            if "link" in truth:
                a, b = truth["link"]
                self.assertEqual(faults, f"{case['fault']}={a}->{b}@op={vm.FAULT_OP}")
            elif case["fault"] == "dead-gpu":
                self.assertEqual(faults, f"dead-rank={truth['rank']}@op={vm.FAULT_OP}")
            else:
                self.assertEqual(faults, "")
                self.assertIn(str(truth["rank"]), args)


if __name__ == "__main__":
    unittest.main()


class RetryMissed(unittest.TestCase):
    def run_main(self, outcomes, *flags):
        calls = []

        def fake(case, root, build):
            calls.append(case)
            return {"outcome": outcomes[len(calls) - 1], "why": "stub"}
        import report_jobs
        saved_run, can_run = vm.run_case, report_jobs.can_run_as_nodes
        vm.run_case = fake
        report_jobs.can_run_as_nodes = lambda: True
        argv, sys.argv = sys.argv, ["verdict_matrix", "--only", "1", *flags]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                return vm.main(), len(calls)
        finally:
            sys.argv, vm.run_case, report_jobs.can_run_as_nodes = argv, saved_run, can_run

    def test_a_missed_case_runs_again_only_when_asked_and_a_wrong_one_never(self):
        self.assertEqual(self.run_main(["missed", "right"], "--retry-missed"), (0, 2))
        self.assertEqual(self.run_main(["missed", "missed"], "--retry-missed"), (1, 2))
        self.assertEqual(self.run_main(["missed"]), (1, 1))
        self.assertEqual(self.run_main(["wrong"], "--retry-missed"), (1, 1))
