"""Look-ups on the shared dump folder per node (issue #44 item 4): a healthy 8-rank job on one
node, every file system call whose path lies under the dump folder counted by strace (an
independent count: open, stat, mkdir, link, rename ...). At start the node's first rank claims
the launch's folder for all of them (watchdog/launch_claim.h): the start-up look-ups do not grow
with the ranks of the node. In the steady state the node looks at the trigger at one rate and
each rank writes its metrics: at most 8 a second per node."""
import collections
import os
import re
import shutil
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from harness import MpiJob, ring_train_binary
from report_jobs import SMALL_MODEL

NRANKS = 8
SECONDS = 30
START_S = 2.0


class LookupsPerNode(unittest.TestCase):
    def setUp(self):
        if not shutil.which("strace"):
            self.skipTest("strace is not installed (scripts/install-deps.sh --tests)")
        self.root = Path(tempfile.mkdtemp(prefix="hangwatch-lookups-"))
        self.addCleanup(shutil.rmtree, self.root, True)

    def run_job(self):
        dumps = self.root / "dumps"
        log = self.root / "strace.log"
        env = dict(LD_PRELOAD=report_jobs.hangwatch_lib(), HANGWATCH_DUMP_DIR=str(dumps),
                   HANGWATCH_JOB_ID="lookups", HANGWATCH_TIMEOUT="60", HANGWATCH_COLLECT="0")
        strace = ["strace", "-f", "--seccomp-bpf", "-ttt", "-e", "trace=%file,%desc", "-o", str(log)]
        argv = [str(ring_train_binary()), "--steps", "1000000", "--log-every", "100000", *SMALL_MODEL]
        # Leaving the job kills its whole session: the ranks strace lets go of when it dies too.
        with MpiJob(NRANKS, argv, env=env, wrap=strace) as job:
            time.sleep(SECONDS)
            err = job.output()
        ops = []
        for line in log.read_text(errors="replace").splitlines():
            m = re.match(r"\d+\s+(\d+\.\d+)\s+(\w+)\((.*)", line)
            if m and str(dumps) in m[3]:
                path = m[3].split('"')[1] if '"' in m[3] else m[3]
                ops.append((float(m[1]), m[2], path.replace(str(dumps) + "/", "")))
        self.assertTrue(ops, f"no look-up under the dump folder was traced\n{err[-3000:]}")
        self.assertFalse((dumps / "lookups" / "TRIGGER.json").exists(), "a healthy job triggered")
        return sorted(ops)

    def test_start_up_look_ups_are_the_nodes_not_each_ranks_and_the_steady_rate_is_bounded(self):
        ops = self.run_job()
        t0, end = ops[0][0], ops[-1][0]
        start = [o for o in ops if o[0] - t0 < START_S]
        steady = [o for o in ops if o[0] - t0 >= START_S + 2]
        steady_rate = len(steady) / max(end - t0 - START_S - 2, 1e-9)
        by_kind = collections.Counter(re.sub(r"\.tmp\.[\d.]+", ".tmp", p) for _, _, p in start)
        claim = sum(n for p, n in by_kind.items() if "ATTEMPT.json" in p)
        trigger = sum(n for p, n in by_kind.items() if p.endswith("TRIGGER.json"))
        print(f"look-ups under the dump folder, {NRANKS} ranks on one node: {len(start)} in the first {START_S:.0f} s "
              f"({claim} on ATTEMPT.json, {trigger} on TRIGGER.json), then {steady_rate:.2f}/s over "
              f"{end - t0 - START_S - 2:.1f} s; {dict(by_kind)}")
        # One claim for the node (it was 2 opens of ATTEMPT.json and a stat of TRIGGER.json per rank).
        self.assertLessEqual(claim, 8, dict(by_kind))
        self.assertLessEqual(trigger, 2, dict(by_kind))
        # The rest at start: the node's trigger turns (4 a second) and the folders made once.
        self.assertLessEqual(len(start), 30, dict(by_kind))
        self.assertLessEqual(steady_rate, 8.0)


if __name__ == "__main__":
    unittest.main()
