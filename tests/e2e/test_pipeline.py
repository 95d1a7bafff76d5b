"""Pipeline jobs (issue 45): ring_train --pp as Megatron runs a TP x PP x DP job, every group an
ncclCommSplit of the world, 1F1B with grouped sends and receives between stages. Each hang is
judged from the report: the culprit, and the pipeline stage it is placed in."""
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

import report_jobs
from e2e_case import E2ECase
from harness import MpiJob, ring_train_binary

# 8 ranks: TP 2 x PP 2 x DP 2, laid out tp-dp-pp: stage 0 = ranks 0-3, stage 1 = ranks 4-7;
# TP groups {0,1} {2,3} {4,5} {6,7}; pipeline pairs 0-4, 1-5, 2-6, 3-7; DP pairs 0-2, 1-3, 4-6, 5-7.
PIPELINE = ["--pp", "2", "--tp", "2", "--microbatches", "4"]


class PipelineCase(E2ECase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="hangwatch-e2e-pipeline-")

    def tearDown(self):
        import shutil
        shutil.rmtree(self.root, ignore_errors=True)

    def hung_report(self, args, faults="", collector=True, ranks_per_node=None, steps=30, nranks=8):
        env = report_jobs.watchdog_env(self.root, faults=faults)
        env.update({"HANGWATCH_ON_HANG": "abort", "HANGWATCH_COLLECT": "1" if collector else "0",
                    "SIMGPU_RANKS_PER_NODE": ""})
        argv = report_jobs.job_argv("ring_train", args, steps)
        if ranks_per_node:
            if not report_jobs.can_run_as_nodes():
                self.skipTest("several nodes need a UTS namespace per rank (root)")
            env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
            argv = [sys.executable, str(report_jobs.AS_NODE), str(ranks_per_node), "--", *argv]
        with MpiJob(nranks, argv, env=env, program="ring_train") as job:
            code = job.wait_exit(180)
            out = job.output()
        self.assertIsNotNone(code, f"the job never aborted:\n{out[-3000:]}")
        job_dir = Path(self.root) / report_jobs.JOB_ID
        code, text, err = report_jobs.report(job_dir, "json", ("--wait", "60" if collector else "0"))
        self.assertEqual(code, 0, err)
        verdict = json.loads(text)["verdict"]
        return verdict, json.dumps(verdict, indent=1)

    def assert_placed(self, verdict, rank, stage, stage_ranks, context):
        place = next((p for p in verdict["pipeline_places"] if p["rank"] == rank), None)
        self.assertIsNotNone(place, context)
        self.assertEqual((place["stage"], place["stages"], place["stage_ranks"]), (stage, 2, stage_ranks), context)


class HealthyPipelines(PipelineCase):
    def test_3d_and_4_stage_jobs_run_to_the_end_checked_and_quiet_under_the_watchdog(self):
        env = report_jobs.watchdog_env(self.root)
        for nranks, args in ((8, PIPELINE), (4, ["--pp", "4", "--microbatches", "8"])):
            with MpiJob(nranks, report_jobs.job_argv("ring_train", args, 12), env=env) as job:
                out = self.assert_completes(job, timeout=90)
            dp = 8 // 4 if nranks == 8 else 1
            self.assertIn(f"pp={args[1]} dp={dp}", out)
        self.assertFalse((Path(self.root) / report_jobs.JOB_ID / "TRIGGER.json").exists())


class PipelineHangs(PipelineCase):
    def test_a_stage_rank_stuck_in_host_code_is_named_with_its_stage(self):
        # Rank 5 loops in host code; its TP peer 4 waits for it in a collective, and stage 0's
        # sends to stage 1 wait behind that: the report follows the waits to rank 5.
        verdict, context = self.hung_report(PIPELINE + ["--stall-rank", "5", "--stall-at-step", "3"])
        self.assertEqual(verdict["kind"], "non-communication-hang", context)
        self.assertTrue(verdict["confident"], context)
        self.assertEqual(verdict["culprit_ranks"], [5], context)
        self.assert_placed(verdict, 5, 1, [4, 5, 6, 7], context)
        frames = [f for w in verdict["where"] if w["rank"] == 5 for f in w["frames"]]
        self.assertTrue(any("stall_in_host_loop" in f for f in frames), context)

    def test_a_stage_that_ran_one_micro_batch_fewer_is_named_with_what_each_side_issued(self):
        # Ranks 4 and 5 (stage 1's first TP group) run 3 micro-batches at step 3, then go on
        # out of step; at the end stage 0 waits for one gradient more than they sent.
        verdict, context = self.hung_report(
            PIPELINE + ["--skip-microbatch-rank", "4", "--skip-at-step", "3", "--no-verify"], collector=False, steps=8)
        self.assertEqual(verdict["kind"], "non-communication-hang", context)
        self.assertEqual(verdict["culprit_ranks"], [4, 5], context)
        self.assertTrue(any("never issued on rank 4's side" in e for e in verdict["evidence"]), context)
        self.assert_placed(verdict, 4, 1, [4, 5, 6, 7], context)

    def test_a_dead_link_in_one_stages_data_parallel_all_reduce_is_that_link(self):
        # The DP group of ranks 4 and 6 (stage 1) is a split communicator: its ring records
        # join the snapshots through NCCL's id. The other stage waits in transfers.
        verdict, context = self.hung_report(PIPELINE, faults="dead-link=4->6@op=3")
        self.assertEqual(verdict["kind"], "communication-hang", context)
        self.assertEqual(verdict["culprit_link"], {"from": 4, "to": 6}, context)
        self.assertIn("debugger", verdict["source"], context)

    def test_a_dead_link_between_stages_inside_a_node_is_the_one_suspect(self):
        # Inside a node NCCL's profiler sees no link and nothing reads a transfer's steps: the
        # link or the GPU at either end; the report says so and names only that link.
        verdict, context = self.hung_report(PIPELINE, faults="dead-link=1->5@op=6", collector=False)
        self.assertEqual(verdict["kind"], "inconclusive", context)
        self.assertFalse(verdict["confident"], context)
        # Stage 1 waits in a group that both receives from rank 1 and sends back to it: one
        # kernel, timed as one, so the snapshots cannot say which direction stopped; or, where
        # rank 1's send completed into rank 5's buffers, the data left rank 1 and never arrived:
        # the link 1 -> 5 or rank 5's GPU.
        links = [s["link"] for s in verdict["suspects"] if s.get("link")]
        ranks = [r for s in verdict["suspects"] if not s.get("link") for r in s["ranks"]]
        self.assertIn({"from": 1, "to": 5}, links, context)
        self.assertLessEqual(len(links), 2, context)
        self.assertTrue(all({l["from"], l["to"]} == {1, 5} for l in links), context)
        self.assertTrue(set(ranks) <= {5}, context)
        self.assertTrue(any(e.startswith("The link") and "pipeline stage 0 of 2 (ranks 0-3)" in e
                            and "pipeline stage 1 of 2 (ranks 4-7)" in e for e in verdict["evidence"]), context)

    def test_a_dead_link_between_stages_on_two_nodes_is_named_from_nccls_profiler(self):
        verdict, context = self.hung_report(PIPELINE, faults="dead-link=1->5@op=6", collector=False, ranks_per_node=4)
        self.assertEqual(verdict["kind"], "communication-hang", context)
        self.assertTrue(verdict["confident"], context)
        self.assertEqual(verdict["culprit_link"], {"from": 1, "to": 5}, context)
        self.assertEqual(verdict["source"], "profiler", context)
        self.assert_placed(verdict, 1, 0, [0, 1, 2, 3], context)
        self.assert_placed(verdict, 5, 1, [4, 5, 6, 7], context)


if __name__ == "__main__":
    unittest.main()


def forensics(*args):
    import subprocess
    r = subprocess.run([report_jobs.forensics_binary(), *map(str, args)], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


class PipelineSlowdowns(PipelineCase):
    """forensics analyze's critical path (issue 45) on a job that runs to its end: 4 ranks, PP 2 x
    DP 2 (stage 0 = ranks 0,1; stage 1 = ranks 2,3), simgpu's GPU slowed so that GEMMs take the
    step as on a real job, 24 steps, the extra work from step 16 on."""

    def analysis(self, extra):
        env = report_jobs.watchdog_env(self.root)
        # GEMMs of about 4 ms (steps of about 140 ms): a loaded 2-core host's scheduling noise
        # is a few ms a step whatever the step's length, and at 2 ms GEMMs (70 ms steps) it made
        # 6 of 23 steps slow, too many for the bubble's one GEMM to show it fitted.
        env.update({"HANGWATCH_METRICS_INTERVAL": "1", "SIMGPU_TFLOPS": "0.00025"})
        args = ["--pp", "2", "--microbatches", "4", "--extra-work-at-step", "16", *extra]
        with MpiJob(4, report_jobs.job_argv("ring_train", args, 24), env=env) as job:
            self.assert_completes(job, timeout=90)
        job_dir = Path(self.root) / report_jobs.JOB_ID
        code, out, err = forensics("analyze", str(job_dir), "--format", "json")
        self.assertEqual(code, 0, err)
        return job_dir, json.loads(out)["critical_path"]

    def test_a_slower_stage_is_the_cause_and_the_same_work_in_the_bubble_is_absorbed(self):
        job_dir, path = self.analysis(["--extra-work-rank", "2", "--extra-work-in", "forward"])
        context = json.dumps({k: path[k] for k in ("causes", "absorbed", "notes", "baseline_step_ms")}, indent=1)
        self.assertEqual([(c["rank"], c["stage"], c["kind"]) for c in path["causes"]], [(2, 1, "gemm")], context)
        self.assertTrue(set(path["causes"][0]["steps"]) >= {18, 19, 20, 21, 22, 23}, context)
        slowest = next(s for s in path["steps"] if s["step"] == path["slowest_step"])
        covered = sum(seg["end_ns"] - seg["start_ns"] for seg in slowest["segments"]) / 1e6
        self.assertAlmostEqual(covered, slowest["ms"], delta=0.05 * slowest["ms"], msg=context)
        # The trace holds the path as its own track.
        trace = Path(self.root) / "trace.json"
        code, out, err = forensics("timeline", str(job_dir), "-o", str(trace))
        self.assertEqual(code, 0, err)
        events = json.loads(trace.read_text())["traceEvents"]
        self.assertTrue(any(e.get("cat") == "critical-path" for e in events), out)
        self.assertTrue(any("slack_ms" in e.get("args", {}) for e in events), out)  # every op's slack

        import shutil
        shutil.rmtree(self.root, ignore_errors=True)
        # Rank 3 (the last stage) runs one GEMM before its first receive: its warm-up bubble is
        # stage 0's first forward (two GEMMs) and the transfer, so no step is longer.
        _, path = self.analysis(["--extra-work-rank", "3", "--extra-work-in", "bubble", "--extra-work-gemms", "1"])
        context = json.dumps({k: path[k] for k in ("causes", "absorbed", "notes", "baseline_step_ms")}, indent=1)
        self.assertEqual(path["causes"], [], context)
        self.assertEqual([a["rank"] for a in path["absorbed"]], [3], context)

    def test_a_hang_that_follows_a_slowdown_says_so(self):
        # Rank 2 (the last stage) gets slower from step 12 on; rank 3 then loops in host code.
        env = report_jobs.watchdog_env(self.root)
        env.update({"HANGWATCH_METRICS_INTERVAL": "1", "SIMGPU_TFLOPS": "0.0005", "HANGWATCH_ON_HANG": "abort",
                    "HANGWATCH_COLLECT": "0"})
        args = ["--pp", "2", "--microbatches", "4", "--extra-work-rank", "2", "--extra-work-at-step", "12",
                "--extra-work-in", "forward", "--stall-rank", "3", "--stall-at-step", "24"]
        with MpiJob(4, report_jobs.job_argv("ring_train", args, 40), env=env) as job:
            self.assertIsNotNone(job.wait_exit(120), job.output()[-3000:])
        code, text, err = report_jobs.report(Path(self.root) / report_jobs.JOB_ID, "json", ("--wait", "0"))
        self.assertEqual(code, 0, err)
        verdict = json.loads(text)["verdict"]
        context = json.dumps(verdict, indent=1)
        self.assertEqual(verdict["culprit_ranks"], [3], context)
        before = [e for e in verdict["evidence"] if e.startswith("Before the hang the job slowed down")]
        self.assertEqual(len(before), 1, context)
        self.assertIn("rank 2 of pipeline stage 1", before[0], context)
