"""The job's own NCCL profiler plugin under the watchdog (issues 16 and 29): libhangwatch.so
takes NCCL_PROFILER_PLUGIN's place and loads the job's plugin behind itself, which must
then see exactly what NCCL gives it when it is loaded alone. Each test runs the same
ring_train job twice, without and with the watchdog, with the census plugin
(tests/unit/fixtures/census_profiler.cc: NCCL's example plugin's manner, counting every
event by type and parent, checking parents and masks), found by each of NCCL's ways to a
profiler plugin, and compares the census of every rank and communicator: identical.
Cost: 2 jobs of 4 ranks and 8 steps per test, about 8 s each."""
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from test_analyze import AnalyzeCase, hangwatch_lib
from harness import MpiJob, ring_train_binary

STEPS = 8
# Every rank its own node: every ring link is a network link with ProxyOps and steps.
SIM = {"SIMGPU_RANKS_PER_NODE": "1", "SIMGPU_TFLOPS": "0.002", "SIMGPU_GEMM_COMPUTE_LIMIT": "0"}
PROXY_OP = 8  # ncclProfileProxyOp
COLL = 2
KERNEL_CH = 64

# Runs the rest of the command line with $FAKE_HOME mounted over the user's home directory
# (NCCL reads ~/.nccl.conf from getpwuid's home, not $HOME), in a private mount namespace;
# the watchdog is preloaded only from there on, as it reads the conf files when it loads.
WITH_FAKE_HOME = r'''
mount --bind "$FAKE_HOME" "$REAL_HOME" || exit 97
if [ -n "$PRELOAD_IN_NAMESPACE" ]; then export LD_PRELOAD="$PRELOAD_IN_NAMESPACE"; fi
exec "$@"
'''


def census_dir():
    lib = os.environ.get("CENSUS_PROFILER")
    return Path(lib).parent if lib else Path(ring_train_binary()).resolve().parents[2] / "tests" / "unit"


def can_mount_over_home():
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        "mount -t tmpfs -o size=1m probe /mnt"], capture_output=True, text=True, timeout=30)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


class JobProfilerUnderTheWatchdog(AnalyzeCase):
    def setUp(self):
        super().setUp()
        self.plugins = census_dir()
        if not (self.plugins / "libnccl-profiler-census.so").exists():
            self.skipTest(f"the census plugin is not built in {self.plugins}")
        self.tmp = Path(tempfile.mkdtemp(prefix="hangwatch-census-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def census(self, name, watchdog, env, args=(), wrap=()):
        """Runs the job once; returns {file name: census text} of every rank and communicator."""
        out = self.tmp / name / ("watchdog" if watchdog else "alone")
        out.mkdir(parents=True)
        full = {"CENSUS_DIR": str(out), "HANGWATCH_DUMP_DIR": str(self.tmp / "dumps"), "HANGWATCH_JOB_ID": name,
                "HANGWATCH_TIMEOUT": "120", "HANGWATCH_COLLECT": "0", "HANGWATCH_METRICS_INTERVAL": "1", **SIM, **env}
        if watchdog:
            full["PRELOAD_IN_NAMESPACE" if wrap else "LD_PRELOAD"] = hangwatch_lib()
        argv = [ring_train_binary(), "--steps", str(STEPS), "--log-every", "1000", *args]
        with MpiJob(4, argv, env=full, wrap=wrap) as job:
            self.assert_completes(job, 80)
        return {p.name: p.read_text() for p in sorted(out.glob("census-*.txt"))}

    def assert_identical(self, name, env, args=(), wrap=(), communicators=1):
        alone = self.census(name, False, env, args, wrap)
        chained = self.census(name, True, env, args, wrap)
        self.assertEqual(len(alone), 4 * communicators, alone.keys())
        for census in alone.values():
            self.assertNotIn("violation", census)
            self.assertIn("start Coll", census)  # it saw its collectives
        self.assertEqual(alone.keys(), chained.keys())
        for key in alone:
            self.assertEqual(alone[key], chained[key], f"{key}: alone vs under the watchdog")
        return alone

    def test_proxy_ops_only_v5_named_by_path(self):
        census = self.assert_identical("v5", {"NCCL_PROFILER_PLUGIN": str(self.plugins / "libnccl-profiler-census.so"),
                                              "CENSUS_MASKS": str(PROXY_OP)})
        rank0 = census["census-0-0.txt"]
        self.assertIn(f"start Coll parent=CollApi: {STEPS}", rank0)
        self.assertIn(f"start ProxyOp parent=Coll: {4 * STEPS}", rank0)  # 2 channels, send and receive

    def test_v4_plugin_named_by_nccls_bare_name_rule(self):
        census = self.assert_identical("v4", {"NCCL_PROFILER_PLUGIN": "census-v4", "CENSUS_MASKS": str(PROXY_OP),
                                              "LD_LIBRARY_PATH": str(self.plugins)})
        self.assertIn("init version=4", census["census-0-0.txt"])
        self.assertIn("start Coll parent=Group", census["census-0-0.txt"])

    def test_masks_per_communicator(self):
        env = {"NCCL_PROFILER_PLUGIN": str(self.plugins / "libnccl-profiler-census.so")}
        # The example plugin's way: set at the first init only; later communicators find it.
        self.assert_identical("masks-first", {**env, "CENSUS_MASKS": str(PROXY_OP)}, ["--tp", "2"], communicators=2)
        # Changed at the second init: NCCL's one mask, for every communicator from then on.
        self.assert_identical("masks-changed", {**env, "CENSUS_MASKS": f"{COLL},{PROXY_OP | KERNEL_CH}"},
                              ["--tp", "2"], communicators=2)

    def test_plugin_named_in_the_home_nccl_conf(self):
        ok, why = can_mount_over_home()
        if not ok:
            self.skipTest(f"cannot mount over the home directory in a mount namespace (unshare -m: {why})")
        home = self.tmp / "home"
        home.mkdir()
        (home / ".nccl.conf").write_text(f"# NCCL settings\nNCCL_PROFILER_PLUGIN={self.plugins}/libnccl-profiler-census.so\n"
                                         f"CENSUS_MASKS={PROXY_OP}\n")
        wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c", WITH_FAKE_HOME, "sh"]
        env = {"FAKE_HOME": str(home), "REAL_HOME": pwd.getpwuid(os.getuid()).pw_dir, "NCCL_CONF_FILE": ""}
        census = self.assert_identical("home-conf", env, wrap=wrap)
        self.assertIn(f"start ProxyOp parent=Coll: {4 * STEPS}", census["census-0-0.txt"])

    def test_nccls_default_library_name(self):
        lib_dir = self.tmp / "libs"
        lib_dir.mkdir()
        (lib_dir / "libnccl-profiler.so").symlink_to(self.plugins / "libnccl-profiler-census.so")
        self.assert_identical("default", {"LD_LIBRARY_PATH": str(lib_dir), "CENSUS_MASKS": str(COLL)})

    def test_the_net_plugins_library_when_no_profiler_library_opens(self):
        self.assert_identical("net", {"NCCL_NET_PLUGIN": "census", "LD_LIBRARY_PATH": str(self.plugins),
                                      "CENSUS_MASKS": str(PROXY_OP)})


class JobProfilerFromTheConfFile(AnalyzeCase):
    def test_a_profiler_from_the_nccl_conf_file_keeps_its_events_and_the_slow_link_is_named(self):
        plugins = census_dir()
        if not (plugins / "libnccl-profiler-census.so").exists():
            self.skipTest("the census plugin is not built")
        conf = Path(self.dump_root) / "nccl.conf"
        conf.write_text(f"# the site's NCCL settings\nNCCL_PROFILER_PLUGIN={plugins}/libnccl-profiler-census.so\n")
        out = Path(self.dump_root) / "census"
        out.mkdir()
        job_dir = self.run_job("chain", faults="slow-link=1->2:0.3", steps=30, NCCL_CONF_FILE=str(conf),
                               CENSUS_DIR=str(out), CENSUS_MASKS=str(PROXY_OP | 16))
        files = sorted(out.glob("census-*.txt"))
        self.assertEqual(len(files), 4, files)
        for f in files:
            text = f.read_text()
            self.assertIn("stop ProxyStep", text)
            self.assertNotIn("violation", text)
        report = self.analyze(job_dir)
        kinds = [(f["kind"], f["link"]) for f in report["findings"]]
        self.assertIn(("slow-link", {"from": 1, "to": 2}), kinds, report)


class HeldBackReceiveStall(AnalyzeCase):
    """A receive into a registered buffer held back for 60 s under the watchdog, with the
    job's plugin behind it: NCCL's proxy (simnccl's, once a millisecond) starts its first step
    again on every pass, and the rank's resident memory stays where it was after 5 s. Skipped
    unless HANGWATCH_LONG_TESTS=1 (it takes a minute); the unit test
    watchdog.MemoryAndHandlesStayBoundedUnderAMillionRestartedSteps is CI's version."""

    def test_sixty_seconds_of_restarted_steps_leave_memory_flat(self):
        if os.environ.get("HANGWATCH_LONG_TESTS") != "1":
            self.skipTest("set HANGWATCH_LONG_TESTS=1 to run the 60 s stall")
        plugins = census_dir()
        program = plugins / "held_back_receive_stall"
        if not program.exists():
            self.skipTest(f"{program} is not built")
        out = Path(self.dump_root) / "rss.txt"
        env = {**os.environ, "LD_PRELOAD": hangwatch_lib(), "SIMGPU_RANKS_PER_NODE": "1",
               "NCCL_PROFILER_PLUGIN": str(plugins / "libnccl-profiler-census.so"), "CENSUS_MASKS": str(PROXY_OP),
               "CENSUS_DIR": self.dump_root, "HANGWATCH_DUMP_DIR": self.dump_root, "HANGWATCH_TIMEOUT": "300",
               "HANGWATCH_WARN_AFTER": "0", "HANGWATCH_COLLECT": "0"}
        r = subprocess.run([str(program), "60", str(out)], env=env, capture_output=True, text=True, timeout=150)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        fields = dict(item.split("=") for item in out.read_text().split())
        growth = int(fields["rss_kb_at_end"]) - int(fields["rss_kb_at_5s"])
        print(f"rank 1 RSS after 5 s {fields['rss_kb_at_5s']} kB, after 60 s {fields['rss_kb_at_end']} kB")
        self.assertLess(growth, 256, fields)
        texts = [p.read_text() for p in Path(self.dump_root).glob("census-*.txt")]
        self.assertEqual(len(texts), 2, "a census per rank")
        for text in texts:
            self.assertNotIn("violation", text)
