"""Prometheus (issue 14): the shipped alert rules pass promtool and its rule unit tests;
a 4-rank ring_train job with HANGWATCH_PROMETHEUS_DIR set is scraped by a real
prometheus-node-exporter (textfile collector) into a real Prometheus on loopback, whose
HTTP API then has every rank's series, fires the slow-GPU alert for the slow rank only,
and the hang alert once the trigger fires."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request
from pathlib import Path

from e2e_case import E2ECase
from harness import MpiJob, SOURCE_DIR, ring_train_binary

HERE = Path(__file__).resolve().parent
RULES = SOURCE_DIR / "examples" / "prometheus" / "hangwatch.rules.yml"
NRANKS = 4
SLOW_RANK = 2
# GEMMs modelled only (4 ms each), so the slow rank's half speed shows whatever the load.
# Every rank its own node: links between nodes report the proxy steps the link series needs.
SIM_ENV = {"SIMGPU_TFLOPS": "0.002", "SIMGPU_GEMM_COMPUTE_LIMIT": "0", "SIMGPU_LINK_GBPS": "0.5",
           "SIMGPU_RANKS_PER_NODE": "1"}
PER_RANK_SERIES = ["hangwatch_hang", "hangwatch_steps_total", "hangwatch_void_ratio", "hangwatch_issue_latency_seconds",
                   "hangwatch_busbw_gbps", "hangwatch_algbw_gbps", "hangwatch_collective_seconds",
                   "hangwatch_gemm_tflops", "hangwatch_link_wire_seconds_total"]
TEXTFILE_BUDGET = 3072


def tool(name):
    return shutil.which(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


class Server:
    """One server process in its own session, killed (with anything it started) on close."""

    def __init__(self, argv, log):
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(15)

    def tail(self):
        return Path(self.log).read_text(errors="replace")[-2000:]


class ShippedRules(unittest.TestCase):
    def setUp(self):
        if not tool("promtool"):
            self.skipTest("promtool is not installed (scripts/install-deps.sh installs prometheus)")

    def test_rules_pass_promtool_check_and_their_unit_tests(self):
        r = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("4 rules found", r.stdout)
        r = subprocess.run(["promtool", "test", "rules", "prometheus_rules_test.yml"], cwd=HERE,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # The shipped rules keep their 5 minutes; only the live test's copy is shortened.
        self.assertEqual(RULES.read_text().count("for: 5m"), 2)


class LiveJob(E2ECase):
    def setUp(self):
        for name in ("prometheus", "prometheus-node-exporter", "promtool"):
            if not tool(name):
                self.skipTest(f"{name} is not installed (scripts/install-deps.sh installs it)")
        lib = Path(ring_train_binary()).resolve().parents[2] / "watchdog" / "libhangwatch.so"
        self.lib = Path(os.environ.get("HANGWATCH_LIB", lib))
        if not self.lib.exists():
            self.skipTest(f"{self.lib} is not built")
        self.tmp = Path(tempfile.mkdtemp(prefix="hangwatch-prometheus-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.textfiles = self.tmp / "textfile"
        self.textfiles.mkdir()
        self.start_stack()

    def start_stack(self):
        # The shipped rules, evaluated every second and firing after 5 s instead of 5 min.
        rules = self.tmp / "hangwatch.rules.yml"
        text = RULES.read_text()
        self.assertEqual(text.count("for: 5m"), 2)
        rules.write_text(text.replace("for: 5m", "for: 5s"))
        self.exporter_port, self.prometheus_port = free_port(), free_port()
        (self.tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: ['{rules}']\n"
            "scrape_configs:\n"
            f"  - job_name: node\n    static_configs: [{{targets: ['127.0.0.1:{self.exporter_port}']}}]\n")
        self.exporter = Server(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{self.exporter_port}",
                                "--collector.disable-defaults", "--collector.textfile",
                                f"--collector.textfile.directory={self.textfiles}"], self.tmp / "exporter.log")
        self.addCleanup(self.exporter.close)
        self.prometheus = Server(["prometheus", f"--config.file={self.tmp / 'prometheus.yml'}",
                                  f"--storage.tsdb.path={self.tmp / 'data'}",
                                  f"--web.listen-address=127.0.0.1:{self.prometheus_port}"], self.tmp / "prometheus.log")
        self.addCleanup(self.prometheus.close)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.prometheus_port}/-/ready", timeout=5).close()
                urllib.request.urlopen(f"http://127.0.0.1:{self.exporter_port}/metrics", timeout=5).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.prometheus.proc.poll() is not None \
                        or self.exporter.proc.poll() is not None:
                    self.fail(f"prometheus or node exporter did not come up:\n{self.prometheus.tail()}\n"
                              f"{self.exporter.tail()}")
                time.sleep(0.5)

    def query(self, promql):
        url = f"http://127.0.0.1:{self.prometheus_port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        reply = get_json(url)
        self.assertEqual(reply["status"], "success", reply)
        return reply["data"]["result"]

    def firing(self, alertname):
        alerts = get_json(f"http://127.0.0.1:{self.prometheus_port}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"]

    def wait_until(self, what, predicate, job, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.assertIsNone(job.proc.poll(), f"the job ended while waiting for {what}:\n{job.output()[-3000:]}")
            self.record_textfile_sizes()
            value = predicate()
            if value:
                return value
            time.sleep(1)
        self.fail(f"no {what} within {timeout} s\n{job.output()[-2000:]}\n{self.prometheus.tail()}")

    def record_textfile_sizes(self):
        for f in self.textfiles.glob("hangwatch_r*.prom"):
            try:
                self.largest[f.name] = max(self.largest.get(f.name, 0), f.stat().st_size)
            except FileNotFoundError:
                pass

    def ranks_of(self, promql):
        return {int(s["metric"]["rank"]) for s in self.query(promql)}

    def test_slow_rank_fires_the_slow_gpu_alert_and_the_trigger_the_hang_alert(self):
        self.largest = {}
        dumps = self.tmp / "dumps"
        env = {"LD_PRELOAD": str(self.lib), "HANGWATCH_DUMP_DIR": str(dumps), "HANGWATCH_JOB_ID": "prom",
               "HANGWATCH_TIMEOUT": "120", "HANGWATCH_COLLECT": "0", "HANGWATCH_METRICS_INTERVAL": "1",
               "HANGWATCH_PROMETHEUS_DIR": str(self.textfiles), "SIMGPU_FAULTS": f"slow-rank={SLOW_RANK}:0.5",
               **SIM_ENV}
        argv = [ring_train_binary(), "--steps", "100000", "--log-every", "1000"]
        everyone = set(range(NRANKS))
        with MpiJob(NRANKS, argv, env=env) as job:
            for series in PER_RANK_SERIES:
                self.wait_until(f"{series} from every rank", lambda: self.ranks_of(series) == everyone, job, 60)
            self.assertEqual(self.ranks_of("hangwatch_hang == 0"), everyone)
            self.wait_until("steps counted on every rank",
                            lambda: self.ranks_of("increase(hangwatch_steps_total[1m]) > 0") == everyone, job, 60)

            slow = self.wait_until("firing HangwatchSlowGpu", lambda: self.firing("HangwatchSlowGpu"), job, 60)
            self.assertEqual({a["labels"]["rank"] for a in slow}, {str(SLOW_RANK)}, json.dumps(slow, indent=1))
            tflops = {int(s["metric"]["rank"]): float(s["value"][1])
                      for s in self.query('max by (rank) (hangwatch_gemm_tflops)')}
            print(f"\nPrometheus: max by (rank) (hangwatch_gemm_tflops) = {tflops}")
            print("firing:", json.dumps([{"labels": a["labels"], "value": a["value"]} for a in slow]))

            for f in sorted(self.textfiles.glob("hangwatch_r*.prom")):
                r = subprocess.run(["promtool", "check", "metrics"], input=f.read_text(), capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(r.returncode, 0, f"{f.name}: {r.stdout}{r.stderr}\n{f.read_text()}")

            r = subprocess.run([os.environ.get("FORENSICS", "forensics"), "trigger", str(dumps / "prom")],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.wait_until("hangwatch_hang 1 on every rank", lambda: self.ranks_of("hangwatch_hang == 1") == everyone,
                            job, 60)
            hung = self.wait_until("firing HangwatchHang", lambda: self.firing("HangwatchHang"), job, 30)
            self.assertEqual({a["labels"]["rank"] for a in hung}, {str(r) for r in everyone})

        print(f"largest textfile per rank (bytes): {dict(sorted(self.largest.items()))}")
        self.assertEqual(len(self.largest), NRANKS)
        self.assertLessEqual(max(self.largest.values()), TEXTFILE_BUDGET)


if __name__ == "__main__":
    unittest.main()
