"""forensics analyze / timeline (issue #6) on real ring_train jobs on simgpu: each
injected slowdown is flagged on the right rank or communicator and nothing else, a
healthy job flags nothing, and the timeline is a valid Chrome trace."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from e2e_case import E2ECase
from harness import MpiJob, ring_train_binary

NRANKS = 4
STEPS = 60
# The emulator's GEMM and link model, not the 2 shared cores, sets the timings: GEMMs
# are modelled only (4 ms each), a ring link moves 0.5 GB/s. Every rank is its own node,
# so every link is a network link that reports proxy steps, as in a multi-node job (on
# one node NCCL, and simnccl, report none).
SIM_ENV = {"SIMGPU_TFLOPS": "0.002", "SIMGPU_GEMM_COMPUTE_LIMIT": "0", "SIMGPU_LINK_GBPS": "0.5",
           "SIMGPU_RANKS_PER_NODE": "1"}


def hangwatch_lib():
    if os.environ.get("HANGWATCH_LIB"):
        return os.environ["HANGWATCH_LIB"]
    return str(Path(ring_train_binary()).resolve().parents[2] / "watchdog" / "libhangwatch.so")


def forensics_binary():
    if os.environ.get("FORENSICS"):
        return os.environ["FORENSICS"]
    return str(Path(ring_train_binary()).resolve().parents[2] / "forensics" / "forensics")


def shown(report):
    """The report for a failure message: every step of the critical path would bury the
    findings, notes and measurements (ctest cuts long output), so only its summary stays."""
    path = report.get("critical_path")
    if path:
        report = {**report, "critical_path": {k: v for k, v in path.items() if k != "steps"}}
    return json.dumps(report, indent=1)


class AnalyzeCase(E2ECase):
    def setUp(self):
        for path in (hangwatch_lib(), forensics_binary()):
            if not Path(path).exists():
                self.skipTest(f"{path} is not built")
        self.dump_root = tempfile.mkdtemp(prefix="hangwatch-analyze-")
        self.addCleanup(shutil.rmtree, self.dump_root, True)

    def run_job(self, job_id, args=(), faults="", nranks=NRANKS, steps=STEPS, sim_env=SIM_ENV, wait=80, **sim):
        env = {"LD_PRELOAD": hangwatch_lib(), "HANGWATCH_DUMP_DIR": self.dump_root, "HANGWATCH_JOB_ID": job_id,
               "HANGWATCH_TIMEOUT": "120", "HANGWATCH_COLLECT": "0", "HANGWATCH_METRICS_INTERVAL": "1",
               "SIMGPU_FAULTS": faults, **sim_env, **sim}
        argv = [ring_train_binary(), "--steps", str(steps), "--log-every", "1000", *args]
        with MpiJob(nranks, argv, env=env) as job:
            self.assert_completes(job, wait)
        return Path(self.dump_root) / job_id

    def analyze(self, job_dir, baseline=None):
        cmd = [forensics_binary(), "analyze", str(job_dir), "--format", "json"]
        if baseline:
            cmd += ["--baseline", str(baseline)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def text(self, job_dir, baseline=None):
        cmd = [forensics_binary(), "analyze", str(job_dir)] + (["--baseline", str(baseline)] if baseline else [])
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout

    def assert_only(self, report, kind, ranks, owner):
        findings = report["findings"]
        self.assertEqual([(f["kind"], f["ranks"]) for f in findings], [(kind, ranks)], shown(report))
        f = findings[0]
        self.assertEqual(f["owner"], owner)
        for key in ("link", "communicator", "metric", "value", "group_median", "evidence"):
            self.assertIn(key, f)
        self.assertTrue(f["evidence"])
        return f


class HealthyRuns(AnalyzeCase):
    def test_five_healthy_runs_flag_nothing_and_stay_under_2kb_per_step(self):
        runs = [self.run_job(f"healthy{i}") for i in range(5)]
        for run in runs:
            report = self.analyze(run)
            self.assertEqual(report["findings"], [], shown(report))
            self.assertEqual(len(report["metrics"]["ranks"]), NRANKS)
        # Against each other as baselines: nothing the baseline scenarios rely on (issue
        # stalls, slow links). A whole-job idle shift is what a loaded machine really does
        # to simgpu (CI: 17% -> 34% on every rank), so it may be reported, but only as such.
        for run in runs[1:3]:
            findings = self.analyze(run, baseline=runs[0])["findings"]
            self.assertEqual([f for f in findings if f["kind"] != "void"], [], findings)
            for f in findings:
                print(f"healthy run against a healthy baseline: {f['evidence'][0]}")
        for rank in range(NRANKS):
            size = (runs[0] / "metrics" / f"r{rank:05d}.jsonl").stat().st_size
            per_step = size / STEPS
            print(f"metrics volume rank {rank}: {size} B for {STEPS} steps = {per_step:.0f} B/step "
                  f"(HANGWATCH_METRICS_INTERVAL=1)")
            self.assertLessEqual(per_step, 2048)


class SlowGpu(AnalyzeCase):
    def test_slow_rank_is_a_slow_gpu_on_that_rank_only(self):
        rank = 2
        report = self.analyze(self.run_job("slowgpu", faults=f"slow-rank={rank}:0.6"))
        f = self.assert_only(report, "slow-gpu", [rank], "operations")
        self.assertLess(f["value"], 0.75 * f["group_median"])
        self.assertIn(f"[slow-gpu] rank {rank}", self.text(Path(self.dump_root) / "slowgpu"))


class SlowLink(AnalyzeCase):
    def assert_link(self, finding, a, b):
        self.assertEqual(finding["link"], {"from": a, "to": b}, finding)
        self.assertEqual(finding["ranks"], [a, b])
        self.assertEqual(finding["owner"], "operations")
        # Named as the ring's bottleneck (its wire time) or as degraded (its wire rate).
        if finding["metric"] == "link_wire_pct":
            self.assertGreater(finding["value"], 3 * finding["group_median"], finding)
        else:
            self.assertEqual(finding["metric"], "link_wire_gbps", finding)
            self.assertLess(finding["value"], 0.5 * finding["group_median"], finding)
        self.assertIn(f"link {a}->{b}", finding["evidence"][0])

    def test_slow_link_on_a_single_ring_is_named_from_the_proxy_steps(self):
        # Every member of a ring sees the same collective time; only the link's time on
        # the wire (NCCL profiler proxy steps, which the watchdog collects) singles it out.
        slow = self.run_job("slowlink", faults="slow-link=1->2:0.3")
        report = self.analyze(slow)
        self.assertEqual([f["kind"] for f in report["findings"]], ["slow-link"], shown(report))
        self.assert_link(report["findings"][0], 1, 2)
        self.assertIsNotNone(report["findings"][0]["communicator"])
        self.assertIn("[slow-link]", self.text(slow))
        # Against a healthy baseline too, still one finding: the ring's slowdown is its evidence.
        healthy = self.run_job("linkbase")
        self.assertEqual(self.analyze(healthy)["findings"], [])
        report = self.analyze(slow, baseline=healthy)
        self.assertEqual([f["kind"] for f in report["findings"]], ["slow-link"], shown(report))
        self.assert_link(report["findings"][0], 1, 2)

    def test_without_the_link_profiler_the_ring_is_flagged_against_a_baseline(self):
        off = {"HANGWATCH_LINK_PROFILER": "0"}
        healthy = self.run_job("linkbase", **off)
        # A twentieth of the bandwidth: the whole-ring comparison with a baseline has 2 shared cores
        # of noise. A loaded machine halves the healthy ring's bus bandwidth (0.22-0.26 GB/s of 0.5
        # beside two busy loops), and at a tenth the slow ring's 0.1 GB/s came to 0.50 of it once,
        # not below the 0.45 the analyzer asks.
        slow = self.run_job("slowlink", faults="slow-link=1->2:0.05", **off)
        alone = self.analyze(slow)
        self.assertEqual(alone["findings"], [], shown(alone))
        report = self.analyze(slow, baseline=healthy)
        # What the comparison had: each run's communicators, members and bus bandwidth.
        for name, run in (("slow run", report), ("baseline", self.analyze(healthy))):
            print(f"\n{name}: " + "; ".join(f"{c['collective']} {c['bytes']} B ranks {c['ranks']} "
                                          f"{c['busbw_gbps']:.3g} GB/s over {c['aligned_instances']}"
                                          for c in run["metrics"]["communicators"]))
        # A slower ring leaves every GPU idle longer, and a loaded machine shifts idle time
        # between two runs anyway: a whole-job idle shift may come beside it, as such (CI saw one).
        report["findings"] = [f for f in report["findings"] if f["kind"] != "void" or print(
            f"beside the slow ring, against the baseline: {f['evidence'][0]}")]
        f = self.assert_only(report, "slow-link", list(range(NRANKS)), "operations")
        self.assertIsNotNone(f["communicator"])
        self.assertLess(f["value"], 0.7 * f["group_median"])
        self.assertTrue(any("1->2" in e for e in f["evidence"]), f["evidence"])

    def test_slow_link_inside_a_tp_group_is_named(self):
        # 512 KB tensor-parallel collectives, so the link model outweighs the 2 shared cores.
        args = ["--tp", "2", "--batch", "512"]
        slow = self.run_job("tpslow", args=args, faults="slow-link=0->1:0.3", SIMGPU_TFLOPS="0.03")
        report = self.analyze(slow)
        self.assertEqual([f["kind"] for f in report["findings"]], ["slow-link"], shown(report))
        self.assert_link(report["findings"][0], 0, 1)


class LoadedMachine(AnalyzeCase):
    """Issue #25: 6 and 8 ranks on 2 cores that two busy loops also load, at ring_train's
    and simgpu's default sizes. Events read the emulated GPU's modeled clock and each
    network step takes its link's time, so a fault shows at its fraction (within 10 %)
    however the CPUs are shared."""
    STEPS = 120

    def setUp(self):
        super().setUp()
        for _ in range(2):
            busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
            self.addCleanup(busy.wait)
            self.addCleanup(busy.kill)

    def run_loaded(self, job_id, nranks, faults="", **sim):
        return self.run_job(job_id, faults=faults, nranks=nranks, steps=self.STEPS, sim_env={}, wait=240, **sim)

    def test_a_slow_gpu_shows_at_its_fraction_on_six_and_eight_ranks(self):
        for nranks in (6, 8):
            with self.subTest(nranks=nranks):
                report = self.analyze(self.run_loaded(f"slowgpu{nranks}", nranks, "slow-rank=4:0.6"))
                f = self.assert_only(report, "slow-gpu", [4], "operations")
                ratio = f["value"] / f["group_median"]
                print(f"slow-rank=4:0.6 on {nranks} ranks under load: TFLOPS at {ratio:.3f} of the median")
                self.assertAlmostEqual(ratio, 0.6, delta=0.06)

    def test_a_slow_link_between_nodes_shows_at_its_fraction(self):
        # NCCL_ALGO=Ring: the fault is on a ring link (NCCL's model runs a 4 MiB AllReduce
        # between nodes as a tree). Two nodes of 3, then every rank its own node.
        for per_node in (3, 1):
            with self.subTest(ranks_per_node=per_node):
                job = self.run_loaded(f"slowlink{per_node}", 6, "slow-link=5->0:0.25", NCCL_ALGO="Ring",
                                      SIMGPU_RANKS_PER_NODE=str(per_node))
                report = self.analyze(job)
                self.assertEqual([f["kind"] for f in report["findings"]], ["slow-link"], shown(report))
                f = report["findings"][0]
                self.assertEqual(f["link"], {"from": 5, "to": 0}, f)
                self.assertEqual(sorted(f["ranks"]), [0, 5])
                self.assertIn("[slow-link] link 5->0", self.text(job))
                ratio = f["value"] / f["group_median"]
                print(f"slow-link=5->0:0.25, {per_node} rank(s) per node, under load: {f['metric']} at "
                      f"{ratio:.3f} of the other links'")
                if f["metric"] == "link_wire_pct":
                    # The bottleneck rule, which the analysis applies first, named it: the ring
                    # waited on it, its data on the wire at least 3 times as long as the other
                    # links' (seen when the suite's other jobs share the two cores as well).
                    self.assertGreaterEqual(ratio, 3.0)
                    continue
                self.assertEqual(f["metric"], "link_wire_gbps")
                # Against 5 other links the median holds it to 10 %; against the one other link
                # of two nodes a few preempted steps on either move it more (0.25-0.30 seen).
                self.assertAlmostEqual(ratio, 0.25, delta=0.025 if per_node == 1 else 0.06)

    def test_healthy_runs_flag_nothing(self):
        for nranks, sim in ((6, {"NCCL_ALGO": "Ring", "SIMGPU_RANKS_PER_NODE": "3"}), (8, {})):
            with self.subTest(nranks=nranks):
                report = self.analyze(self.run_loaded(f"healthy{nranks}", nranks, **sim))
                self.assertEqual(report["findings"], [], shown(report))
                self.assertEqual(len(report["metrics"]["ranks"]), nranks)


class IssueStalls(AnalyzeCase):
    def test_sync_every_layer_on_one_rank_is_an_issue_stall_there(self):
        rank = 1
        report = self.analyze(self.run_job("sync1", args=["--sync-every-layer", "--sync-rank", str(rank)]))
        f = self.assert_only(report, "issue-stall", [rank], "algorithm")
        self.assertLess(f["value"], f["group_median"] / 4)
        self.assertTrue(any("synchroniz" in e for e in f["evidence"]), f["evidence"])

    def test_sync_every_layer_on_all_ranks_shows_against_the_baseline(self):
        healthy = self.run_job("syncbase")
        synced = self.run_job("syncall", args=["--sync-every-layer"])
        self.assertEqual(self.analyze(synced)["findings"], [])
        self.assert_only(self.analyze(synced, baseline=healthy), "issue-stall", list(range(NRANKS)), "algorithm")


class HostStalls(AnalyzeCase):
    def test_gc_pause_on_one_rank_is_a_host_stall_there(self):
        rank = 3
        # A 50 ms pause every 10th step is ~5% of this short job's time, right at the 5-point
        # threshold, and failed 1 run in 5 on a loaded machine; every 5th step doubled it, and
        # CI's load (4 ranks, 2 cores, the sanitizer builds beside) still spread the other ranks'
        # idle enough to hide it once: 100 ms every 5th step, ~25% of the job's time.
        report = self.analyze(self.run_job("gc", args=["--gc-pause-ms", "100", "--gc-every", "5", "--gc-rank", str(rank)]))
        self.assert_only(report, "host-stall", [rank], "algorithm")

    def test_slow_dataloader_on_one_rank_is_a_dataloader_stall_there(self):
        rank = 2
        # The dataloader prefetches, so it stalls the step only when a batch takes longer than
        # the step itself: ~60 ms here, ~150 ms on a loaded CI machine (where 100 ms kept up).
        report = self.analyze(self.run_job(
            "dataloader", args=["--slow-dataloader-rank", str(rank), "--slow-dataloader-ms", "300"], steps=30))
        self.assert_only(report, "dataloader-stall", [rank], "algorithm")


class Timeline(AnalyzeCase):
    def test_timeline_is_a_chrome_trace_with_collectives_linked_across_ranks(self):
        job_dir = self.run_job("timeline", steps=20)
        out = Path(self.dump_root) / "trace.json"
        r = subprocess.run([forensics_binary(), "timeline", str(job_dir), "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        trace = json.loads(out.read_text())
        events = trace["traceEvents"]
        pids, slices, flows = set(), 0, {}
        for e in events:
            self.assertIn(e["ph"], {"M", "X", "i", "s", "t", "f"}, e)
            self.assertIsInstance(e["pid"], int)
            self.assertIsInstance(e["name"], str)
            if e["ph"] == "M":
                continue
            self.assertIsInstance(e["tid"], int)
            self.assertIsInstance(e["ts"], (int, float))
            self.assertGreaterEqual(e["ts"], 0)
            pids.add(e["pid"])
            if e["ph"] == "X":
                self.assertGreaterEqual(e["dur"], 0)
                slices += 1
            if e["ph"] in ("s", "t", "f"):
                flows.setdefault(e["id"], []).append(e["pid"])
        # One process per rank, and above them the critical path of each step (its own track).
        path = [e for e in events if e.get("cat") == "critical-path"]
        self.assertTrue(path, "no critical-path track")
        self.assertEqual(pids - {path[0]["pid"]}, set(range(NRANKS)))
        self.assertGreater(slices, 20 * NRANKS)
        # Each AllReduce of the 20 steps is one arrow through all ranks.
        full = [p for p in flows.values() if sorted(p) == list(range(NRANKS))]
        self.assertGreaterEqual(len(full), 20)


class BadInput(AnalyzeCase):
    def test_exit_codes_and_damaged_files(self):
        f = forensics_binary()
        for cmd in ("analyze", "timeline"):
            self.assertEqual(subprocess.run([f, cmd, "--help"], capture_output=True).returncode, 0)
            self.assertEqual(subprocess.run([f, cmd], capture_output=True).returncode, 2)
            self.assertEqual(subprocess.run([f, cmd, self.dump_root, "--bogus"], capture_output=True).returncode, 2)
        empty = Path(self.dump_root) / "empty"
        empty.mkdir()
        self.assertEqual(subprocess.run([f, "analyze", str(empty)], capture_output=True).returncode, 1)
        self.assertEqual(subprocess.run([f, "timeline", str(empty), "-o", str(empty / "t.json")],
                                        capture_output=True).returncode, 1)
        job_dir = self.run_job("damaged", steps=20)
        (job_dir / "metrics" / "r00001.jsonl").write_text("{truncated\n")
        with open(job_dir / "metrics" / "r00002.jsonl", "a") as m:
            m.write("{\"rank\": 2, \"ops\": [\n")
        (job_dir / "metrics" / "r00003.jsonl").unlink()
        (job_dir / "timeline" / "r00000.json").write_text("[1, 2")
        report = self.analyze(job_dir)
        notes = "\n".join(report["notes"])
        self.assertIn("rank 1", notes)
        self.assertIn("rank 2", notes)
        self.assertIn("3", notes)
        self.assertIn("r00000.json", notes)


if __name__ == "__main__":
    unittest.main()
