"""Ranks that are not there: one whose process ends inside a collective (killed, as the OOM
killer does, under srun as Slurm runs it by default: the others run on and wait), one frozen
there (SIGSTOP: alive, answering nothing), and one that
never calls ncclCommInitRank (stuck in its own code before it), so the communicator never forms.
Two nodes of two ranks (launchers/as_node.py), abort mode, as a restartable job runs."""
import json
import shutil
import sys
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from harness import MpiJob, srun_like

NRANKS = 4
CULPRIT = 2  # the first rank of the second node: its node has a rank that survives it


class RankGone(unittest.TestCase):
    def setUp(self):
        if not report_jobs.can_run_as_nodes():
            self.skipTest("jobs on several nodes need a UTS namespace per rank (root)")
        self.root = Path(tempfile.mkdtemp(prefix="hangwatch-gone-"))
        self.addCleanup(shutil.rmtree, self.root, True)

    def run_job(self, args, launcher, nranks=NRANKS, env_extra=None, report_once_done=None, per_node=2):
        """Abort mode, reported once the job ended; or, with `report_once_done` (ranks), wait
        mode, reported as soon as those ranks' dumps are done (the job is then killed): what the
        report says, without the 30 s a job waits for a rank nobody wrote a state for."""
        env = report_jobs.watchdog_env(self.root, timeout_s=3)
        env.update({"HANGWATCH_ON_HANG": "wait" if report_once_done else "abort", "HANGWATCH_COLLECT": "1",
                    "NCCL_ALGO": "Ring", **(env_extra or {})})
        env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
        argv = [sys.executable, str(report_jobs.AS_NODE), str(per_node), "--",
                *report_jobs.job_argv("ring_train", args, 40)]
        start = time.monotonic()
        ranks = self.root / report_jobs.JOB_ID / "ranks"

        def done(_):
            return all('"done"' in self.read_text(ranks / f"r{r:05d}.state.json") for r in report_once_done)
        with MpiJob(nranks, argv, env=env, program="ring_train", launcher=launcher) as job:
            if report_once_done:
                ended = job.wait_for(done, 150)
            else:
                ended = job.wait_exit(200) is not None
            out = job.output()
        self.assertTrue(ended, f"the job never ended or dumped:\n{out[-3000:]}")
        return report_jobs.report_json(self.root / report_jobs.JOB_ID), time.monotonic() - start, out

    @staticmethod
    def read_text(path):
        try:
            return path.read_text()
        except OSError:
            return ""

    def test_a_rank_killed_inside_a_collective_is_named_from_its_node(self):
        self.check_exited("kill")

    def test_a_rank_calling_exit_inside_a_collective_is_named_from_its_node(self):
        # exit() runs the exit handlers: the watchdog's keeps it on the node's board, since a
        # collective was still pending.
        self.check_exited("exit")

    def check_exited(self, how):
        rep, seconds, out = self.run_job(["--exit-rank", str(CULPRIT), "--exit-at-step", "4", "--exit-how", how],
                                         srun_like(NRANKS, kill_on_bad_exit=False))
        v = rep["verdict"]
        self.assertEqual(v["kind"], "communication-hang", json.dumps(v, indent=1))
        self.assertEqual(v["culprit_ranks"], [CULPRIT], json.dumps(v, indent=1))
        self.assertIn(CULPRIT, rep["ranks_missing"])
        # The job's output with it: the watchdog logs each node peer it notes as gone ("rank 2 (pid
        # N) of this node has exited"), and a dump folder it gave up.
        self.assertTrue(any("had exited" in e for e in v["evidence"]), f"{v['evidence']}\n{out[-6000:]}")
        # Its node's survivor said it is gone: abort mode does not wait out HANGWATCH_ABORT_GRACE (120 s).
        self.assertLess(seconds, 100, out[-3000:])

    def test_a_rank_frozen_by_sigstop_inside_a_collective_is_named_with_its_gpu(self):
        # Its process stays (state T): no dump of its own, but a rank of its node reads the
        # stop from /proc and says so. Frozen mid-run, as a stray ^Z or a tracer's stop does. Slurm's --kill-on-bad-exit ends it once the others abort.
        rep, seconds, out = self.run_job(["--exit-rank", str(CULPRIT), "--exit-at-step", "30", "--exit-how", "stop"],
                                         srun_like(NRANKS, kill_wait=2))
        v = rep["verdict"]
        self.assertEqual(v["kind"], "communication-hang", json.dumps(v, indent=1))
        self.assertEqual(v["culprit_ranks"], [CULPRIT], json.dumps(v, indent=1))
        self.assertTrue(v["confident"], json.dumps(v, indent=1))
        self.assertIn("frozen", v["headline"])
        said = next((e for e in v["evidence"] if "was stopped" in e), None)
        self.assertIsNotNone(said, v["evidence"])
        # fake_srun gives every task SLURM_LOCALID = its rank, and ring_train picks the device of
        # its local rank: rank 2 drives GPU 2, as its own board entry told its node peer.
        self.assertIn(f"GPU {CULPRIT} on host node-1", said)
        self.assertNotIn("unknown", said)
        self.assertTrue(any("kill -CONT" in s for s in v["next_steps"]), v["next_steps"])
        self.assertLess(seconds, 100, out[-3000:])

    def test_a_rank_killed_alone_on_its_node_is_not_waited_for_past_the_answer_window(self):
        # 3 ranks as nodes of 2: rank 2 is alone on node-1, so nobody writes its state. Abort
        # mode stops waiting for it 30 s after rank 0 began waiting (JobCompletion's answer
        # window), not after HANGWATCH_ABORT_GRACE (120 s); the report still names the hang.
        # Over sockets its network peers' NCCL reads the closed connection (ncclRemoteError),
        # which their snapshots carry: the rank is named as gone, not hedged.
        rep, seconds, out = self.run_job(["--exit-rank", "2", "--exit-at-step", "4", "--exit-how", "kill"],
                                         srun_like(3, kill_on_bad_exit=False), nranks=3,
                                         env_extra={"NCCL_NET": "Socket"})
        self.assertIn(2, rep["ranks_missing"])
        v = rep["verdict"]
        self.assertEqual(v["culprit_ranks"], [2], json.dumps(v, indent=1))
        self.assertTrue(v["confident"], json.dumps(v, indent=1))
        self.assertIn("rank 2 is gone", v["headline"])
        self.assertTrue(any("ncclRemoteError" in e for e in v["evidence"]), v["evidence"])
        self.assertIn("silent", out)
        self.assertLess(seconds, 70, out[-3000:])
        print(f"a rank dead alone on its node: the job ended {seconds:.0f} s after it started")

    def killed_alone_over_ib(self, collect):
        """3 ranks as nodes of 2, rank 2 killed alone on node-1, over IB: named from NCCL's RAS.
        Returns the verdict, its RAS sentence, the seconds the job took to be reported, its output."""
        rep, seconds, out = self.run_job(["--exit-rank", "2", "--exit-at-step", "4", "--exit-how", "kill"],
                                         srun_like(3, kill_on_bad_exit=False), nranks=3,
                                         env_extra={"NCCL_NET": "IB", "NCCL_IB_TIMEOUT": "20",
                                                    "HANGWATCH_COLLECT": collect},
                                         report_once_done=[0, 1])
        v = rep["verdict"]
        self.assertEqual(v["culprit_ranks"], [2], json.dumps(v, indent=1))
        self.assertTrue(v["confident"], json.dumps(v, indent=1))
        self.assertIn("rank 2 does not answer", v["headline"])
        said = next((e for e in v["evidence"] if "NCCL's RAS" in e), None)
        self.assertIsNotNone(said, v["evidence"])
        return v, said, seconds, out

    def test_a_rank_killed_alone_on_its_node_over_ib_is_named_from_nccls_ras(self):
        # Over InfiniBand nothing fails on the peers: a queue pair with nothing posted to the dead
        # process never errs (NCCL_IB_TIMEOUT 20: 34 s for one that has). NCCL's RAS, asked by the
        # collector of node-0's lowest rank before it stops anything, lists rank 2 missing.
        v, said, seconds, out = self.killed_alone_over_ib(collect="1")
        self.assertIn("asked by the collector of rank(s) 0", said)
        self.assertFalse(any("ncclRemoteError" in e for e in v["evidence"]), v["evidence"])
        dump = json.loads((self.root / report_jobs.JOB_ID / "ranks" / "r00000.forensics.json").read_text())
        ras = next(p for p in dump["phases"] if p["name"] == "ras")
        self.assertTrue(ras["ok"], ras)
        # Rank 1 shares node-0 with rank 0: one question per node.
        one = json.loads((self.root / report_jobs.JOB_ID / "ranks" / "r00001.forensics.json").read_text())
        self.assertNotIn("ras", one)
        self.assertLess(seconds, 90, out[-3000:])

    def test_a_rank_killed_alone_on_its_node_over_ib_is_named_from_nccls_ras_with_the_collector_off(self):
        # HANGWATCH_COLLECT=0: nothing attaches, so node-0's lowest rank asks RAS itself through
        # `forensics ras` (its answer in ranks/r00000.ras.json) before it marks its dumps done.
        _, said, seconds, out = self.killed_alone_over_ib(collect="0")
        self.assertIn("from the node of rank(s) 0 with nothing stopped", said)
        ranks = self.root / report_jobs.JOB_ID / "ranks"
        self.assertEqual(sorted(p.name for p in ranks.glob("*.forensics.json")), [])
        answer = json.loads((ranks / "r00000.ras.json").read_text())
        self.assertEqual(answer["ras"]["asked_by"], "ras-command")
        self.assertNotIn("error", answer["ras"])
        # Rank 1 shares node-0 with rank 0: one question per node. Rank 0 was marked done only
        # once the answer was in.
        self.assertFalse((ranks / "r00001.ras.json").exists())
        state = json.loads((ranks / "r00000.state.json").read_text())
        self.assertGreaterEqual(state["time_unix_s"], answer["ras"]["time_unix_s"] + answer["ras"]["seconds"])
        self.assertLess(seconds, 90, out[-3000:])

    def test_a_pipeline_rank_killed_alone_over_ib_is_named_from_ras_asked_outside_its_groups(self):
        # A pipeline job (pp=2, dp=2: stage groups {0,1} and {2,3}, pipeline groups {0,2} and
        # {1,3}) on nodes {0,1,2} and {3}, collector off. Rank 3 is killed alone on node-1; the
        # collectives that hang are on {2,3} and {1,3}. Only rank 0 asks RAS, a member of neither:
        # NCCL's STATUS merges every process's communicators, so the answer still has them.
        rep, _, out = self.run_job(["--pp", "2", "--exit-rank", "3", "--exit-at-step", "4", "--exit-how", "kill"],
                                   srun_like(4, kill_on_bad_exit=False), nranks=4,
                                   env_extra={"NCCL_NET": "IB", "NCCL_IB_TIMEOUT": "20", "HANGWATCH_COLLECT": "0"},
                                   report_once_done=[0, 1, 2], per_node=3)
        v = rep["verdict"]
        self.assertEqual(v["culprit_ranks"], [3], json.dumps(v, indent=1))
        self.assertTrue(v["confident"], json.dumps(v, indent=1))
        said = next((e for e in v["evidence"] if "NCCL's RAS" in e), None)
        self.assertIsNotNone(said, v["evidence"])
        self.assertIn("from the node of rank(s) 0 with nothing stopped", said)
        self.assertIn("(rank 3 of the job) missing", said)
        # The chain that led there: rank 1's collective queued behind its send to rank 3.
        self.assertTrue(any("queued behind work its GPU runs" in e and "ncclSend to rank 3" in e for e in v["evidence"]),
                        v["evidence"])
        ranks = self.root / report_jobs.JOB_ID / "ranks"
        self.assertEqual(sorted(p.name for p in ranks.glob("*.ras.json")), ["r00000.ras.json"], out[-3000:])
        answer = json.loads((ranks / "r00000.ras.json").read_text())
        self.assertEqual(len(answer["ras"]["communicators"]), 5)  # world, 2 stage and 2 pipeline groups

    def test_a_rank_that_never_calls_init_is_named_with_where_it_is(self):
        rep, _, _ = self.run_job(["--stall-rank", str(CULPRIT), "--stall-at-step", "init", "--stall-kind", "sleep"],
                                 None)
        v = rep["verdict"]
        self.assertEqual(v["kind"], "non-communication-hang", json.dumps(v, indent=1))
        self.assertEqual(v["culprit_ranks"], [CULPRIT], json.dumps(v, indent=1))
        self.assertEqual(rep["ranks_missing"], [])
        self.assertTrue(any("stall_in_sleep" in e for e in v["evidence"]), v["evidence"])


if __name__ == "__main__":
    unittest.main()
