"""forensics collect on live ranks: the fast ptrace pass finds where every thread of a
hung simgpu job waits (native and Python frames), ranks collect in parallel, the
target is never left stopped, and every bad input gives a clear error, not a crash."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from e2e_case import E2ECase
from harness import SOURCE_DIR, MpiJob, ring_train_binary, train_py

SMALL_MODEL = ["--grad-mb", "1", "--hidden", "128", "--layers", "2", "--batch", "32"]
PROGRAMS = SOURCE_DIR / "tests" / "programs"
# Native frames of a thread blocked in a Python lock, a condition variable or a futex.
NATIVE_WAITS = ("pthread_cond_wait", "sem_wait", "sem_clock_wait", "do_futex_wait", "__futex_abstimed_wait_common",
                "PyThread_acquire_lock_timed", "futex_wait")


def forensics_binary():
    default = Path(ring_train_binary()).resolve().parents[2] / "forensics" / "forensics"
    return os.environ.get("FORENSICS", str(default))


def start_collect(pid, out, rank=None, backend="host", env=None, extra=(), user=None):
    cmd = [forensics_binary(), "collect", "--pid", str(pid), "--out", str(out), "--backend", backend, *extra]
    if rank is not None:
        cmd += ["--rank", str(rank)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def collect(pid, out, **kw):
    proc = start_collect(pid, out, **kw)
    text, _ = proc.communicate(timeout=120)
    return proc.returncode, text


def load_dump(out, pid=None, rank=None):
    name = f"r{rank:05d}" if rank is not None else f"p{pid}"
    return json.loads((Path(out) / "ranks" / f"{name}.forensics.json").read_text())


def functions(thread):
    return [f["function"] for f in thread["frames"]]


def index_of(thread, predicate):
    return next((i for i, f in enumerate(thread["frames"]) if predicate(f)), None)


def describe(dump):
    return "\n".join(f"{t['tid']} {t['name']}: {' <- '.join(functions(t)[:14])}" for t in dump["threads"])


def process_state(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        return None
    return None


class CollectorCase(E2ECase):
    def setUp(self):
        if not os.path.exists(forensics_binary()):
            self.skipTest(f"forensics ({forensics_binary()}) not built")
        self.out = tempfile.mkdtemp(prefix="hangwatch-collect-")
        self.addCleanup(shutil.rmtree, self.out, True)
        os.chmod(self.out, 0o777)

    def collect_in_parallel(self, pids, **kw):
        procs = {rank: start_collect(pid, self.out, rank=rank, **kw) for rank, pid in pids.items()}
        results = {rank: p.communicate(timeout=180) for rank, p in procs.items()}
        for rank, p in procs.items():
            self.assertEqual(p.returncode, 0, f"rank {rank}: {results[rank][0]}")
        return {rank: load_dump(self.out, rank=rank) for rank in pids}

    def assert_not_stopped(self, pids):
        for pid in pids:
            self.assertNotIn(process_state(pid), ("T", "t", None), f"pid {pid} left stopped or gone")

    def start_target(self, *flags):
        target = subprocess.Popen([sys.executable, str(PROGRAMS / "idle_target.py"), *flags], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (target.kill(), target.communicate()))
        self.assertIn("ready", target.stdout.readline())
        return target

    def assert_target_finishes(self, target):
        self.assert_not_stopped([target.pid])
        out, _ = target.communicate("", timeout=30)
        self.assertEqual(target.returncode, 0)
        self.assertIn("idle_target done", out)


class HungRingTrain(CollectorCase):
    def test_every_rank_shows_channels_in_wait_peer_and_main_in_the_collective_wait(self):
        with MpiJob(4, [ring_train_binary(), "--steps", "50", *SMALL_MODEL],
                    env={"SIMGPU_FAULTS": "dead-link=1->2@op=10"}) as job:
            self.assert_stuck(job, last_step=9)
            pids = job.pids()
            dumps = self.collect_in_parallel(pids, backend="auto")
            for rank, dump in dumps.items():
                text = describe(dump)
                self.assertEqual(dump["pid"], pids[rank])
                # The debugger phase read every channel's wait state (issue #4's records).
                ring = dump["ring_progress"]
                self.assertEqual(sorted(r["channel"] for r in ring), [0, 1], text)
                self.assertTrue(all(r["op"] == "ncclAllReduce" for r in ring), ring)
                channels = [t for t in dump["threads"] if t["name"].startswith("simnccl-ch")]
                self.assertGreaterEqual(len(channels), 2, text)
                for t in channels:
                    self.assertIn("simnccl_wait_peer", functions(t), text)
                main = next(t for t in dump["threads"] if t["tid"] == pids[rank])
                # The collective is queued on the stream; the host waits for that stream, in a condvar.
                sync = index_of(main, lambda f: f["function"] == "cudaStreamSynchronize")
                wait = index_of(main, lambda f: f["function"].startswith("pthread_cond_wait"))
                step = index_of(main, lambda f: f["function"] == "Trainer::step(int)")
                self.assertIsNotNone(sync, text)
                self.assertIsNotNone(wait, text)
                self.assertIsNotNone(step, text)
                self.assertLess(wait, sync, text)
                self.assertLess(sync, step, text)
                phases = {p["name"]: p for p in dump["phases"]}
                self.assertTrue(phases["attach"]["ok"] and phases["unwind"]["ok"], phases)
                self.assertTrue(phases["debugger"]["ok"], phases)
                self.assertEqual(dump["backend"], "sim")
            self.assert_not_stopped(pids.values())
            self.assert_the_index_cache_changes_nothing_read(pids, dumps)
            time.sleep(1)
            self.assertEqual(set(job.steps_done().values()), {9}, "the hang must still be there")
            self.assertIsNone(job.proc.poll())

    def assert_the_index_cache_changes_nothing_read(self, pids, dumps):
        """As the watchdogs start them (--state --node): the node's first rank fills the debugger's
        index cache in $TMPDIR; the next hang's debuggers all read it, and read the same rings."""
        tmpdir = tempfile.mkdtemp(prefix="hangwatch-index-cache-")
        self.addCleanup(shutil.rmtree, tmpdir, True)
        cache = Path(tmpdir) / f"hangwatch-gdb-index-{os.geteuid()}"
        node = ("--state", "--node", ",".join(str(r) for r in sorted(pids)))
        for attempt in ("cold", "warm"):
            again = self.collect_in_parallel(pids, backend="auto", env={"TMPDIR": tmpdir}, extra=node)
            self.assertTrue(list(cache.glob("*.gdb-index")), f"{attempt}: nothing in {cache}")
            self.assertEqual(cache.stat().st_mode & 0o777, 0o700)
            for rank, dump in again.items():
                self.assertTrue({p["name"]: p for p in dump["phases"]}["debugger"]["ok"], dump["phases"])
                self.assertEqual(dump["ring_progress"], dumps[rank]["ring_progress"], f"{attempt}, rank {rank}")
            self.assert_not_stopped(pids.values())


class DeadRankInsideTheCollective(CollectorCase):
    def test_dead_rank_kernel_stalls_while_its_main_thread_waits_in_synchronize(self):
        with MpiJob(4, [ring_train_binary(), "--steps", "50", *SMALL_MODEL],
                    env={"SIMGPU_FAULTS": "dead-rank=2@op=5"}) as job:
            self.assert_stuck(job, last_step=4)
            pids = job.pids()
            dumps = self.collect_in_parallel(pids)
            dead = dumps[2]
            main = next(t for t in dead["threads"] if t["tid"] == pids[2])
            # As with NCCL the call returned once the work was queued; the host waits where it
            # synchronizes, inside Trainer::step.
            self.assertIsNone(index_of(main, lambda f: f["function"] == "ncclAllReduce"), describe(dead))
            sync = index_of(main, lambda f: f["function"] == "cudaStreamSynchronize")
            step = index_of(main, lambda f: f["function"] == "Trainer::step(int)")
            self.assertIsNotNone(sync, describe(dead))
            self.assertIsNotNone(step, describe(dead))
            self.assertLess(sync, step, describe(dead))
            for t in (t for t in dead["threads"] if t["name"].startswith("simnccl-ch")):
                self.assertIn("simnccl_device_stalled", functions(t), describe(dead))
            for rank in (0, 1, 3):
                channels = [t for t in dumps[rank]["threads"] if t["name"].startswith("simnccl-ch")]
                self.assertTrue(channels, describe(dumps[rank]))
                for t in channels:
                    self.assertIn("simnccl_wait_peer", functions(t), describe(dumps[rank]))
            self.assert_not_stopped(pids.values())


class CollectedJobRunsOn(CollectorCase):
    def test_a_job_collected_mid_run_completes(self):
        with MpiJob(4, [ring_train_binary(), "--steps", "40", *SMALL_MODEL]) as job:
            self.assertTrue(job.wait_for(lambda _: min(job.steps_done().values()) >= 2, 60), job.output()[-2000:])
            dumps = self.collect_in_parallel(job.pids(), backend="auto")
            for dump in dumps.values():
                self.assertGreaterEqual(len(dump["threads"]), 5, describe(dump))
            self.assert_completes(job, timeout=120)


class PythonDataloaderDeadlock(CollectorCase):
    def test_merged_stack_shows_python_frames_above_the_native_wait(self):
        with MpiJob(2, [sys.executable, train_py(), "--steps", "50", "--grad-mb", "1", "--hidden", "128",
                        "--stall-rank", "1", "--stall-at-step", "5", "--stall-kind", "dataloader"],
                    program="python_train") as job:
            self.assert_stuck(job, last_step={1: 4})
            pid = job.pids()[1]
            code, text = collect(pid, self.out, rank=1)
            self.assertEqual(code, 0, text)
            dump = load_dump(self.out, rank=1)
            self.assertTrue(dump["python_version"].startswith("3."), dump["python_version"])
            main = next(t for t in dump["threads"] if t["tid"] == pid)
            self.assertEqual(main["name"], "MainThread", describe(dump))
            frames = main["frames"]
            py = [(i, f) for i, f in enumerate(frames) if f["kind"] == "python"]
            self.assertTrue(py, describe(dump))
            for _, f in py:
                self.assertTrue(f.get("file") and f.get("line"), f)
            wait = index_of(main, lambda f: f["kind"] == "native" and any(w in f["function"] for w in NATIVE_WAITS))
            get = index_of(main, lambda f: f["kind"] == "python" and f["function"] == "get"
                           and f["file"].endswith("queue.py"))
            train = index_of(main, lambda f: f["kind"] == "python" and f["function"] == "train"
                             and f["file"].endswith("train.py"))
            module = index_of(main, lambda f: f["kind"] == "python" and f["function"] == "<module>")
            native_main = index_of(main, lambda f: f["kind"] == "native" and f["function"] in ("main", "Py_BytesMain"))
            self.assertTrue(None not in (wait, get, train, module, native_main), describe(dump))
            self.assertLess(wait, get, describe(dump))
            self.assertLess(get, train, describe(dump))
            self.assertLess(train, module, describe(dump))
            self.assertLess(module, native_main, describe(dump))
            loader = [t for t in dump["threads"] if t["name"] == "dataloader"]
            self.assertEqual(len(loader), 1, describe(dump))
            shard = index_of(loader[0], lambda f: f["kind"] == "python" and f["function"] == "_open_shard_index")
            run = index_of(loader[0], lambda f: f["kind"] == "python" and f["function"] == "run")
            self.assertTrue(shard is not None and run is not None and shard < run, describe(dump))
            self.assert_not_stopped([pid])


class CollectorStartedByItsTarget(CollectorCase):
    def test_a_process_can_collect_itself_through_a_child_collector(self):
        # What the watchdog does: the hung rank spawns `forensics collect --pid <self>`.
        script = ("import os, subprocess, sys\n"
                  "def spawn_collector():\n"
                  "    return subprocess.run([sys.argv[1], 'collect', '--pid', str(os.getpid()), '--rank', '0',\n"
                  "                           '--out', sys.argv[2], '--backend', 'auto']).returncode\n"
                  "print('collector exit', spawn_collector(), flush=True)\n")
        r = subprocess.run([sys.executable, "-c", script, forensics_binary(), self.out], capture_output=True,
                           text=True, timeout=120)
        self.assertIn("collector exit 0", r.stdout, r.stdout + r.stderr)
        dump = load_dump(self.out, rank=0)
        main = next(t for t in dump["threads"] if t["name"] == "MainThread")
        self.assertIsNotNone(index_of(main, lambda f: f["kind"] == "python" and f["function"] == "spawn_collector"),
                             describe(dump))
        self.assertEqual(dump["backend"], "host")


class BadInput(CollectorCase):
    def test_nonexistent_pid_is_refused_clearly(self):
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
        pid = next(p for p in range(pid_max - 1, 1, -1) if not Path(f"/proc/{p}").exists())
        code, text = collect(pid, self.out)
        self.assertEqual(code, 1, text)
        self.assertIn(f"no process with pid {pid}", text)
        self.assertFalse((Path(self.out) / "ranks").exists())

    def test_bad_arguments_exit_2_with_usage(self):
        result = subprocess.run([forensics_binary(), "collect", "--pid", "x", "--out", self.out],
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--pid", result.stderr)
        self.assertIn("usage: forensics collect", result.stderr)

    def test_another_users_process_gives_permission_error_and_proc_data(self):
        target = self.start_target()
        code, text = collect(target.pid, self.out, user=65534)
        self.assertEqual(code, 1, text)
        self.assertIn("permission denied", text)
        self.assertIn("uid 0", text)
        dump = load_dump(self.out, pid=target.pid)
        # What /proc still shows another user: every thread with its state.
        self.assertGreaterEqual(len(dump["threads"]), 4)
        self.assertTrue(all(t["state"] for t in dump["threads"]), dump["threads"])
        self.assertEqual(dump["unwinder"], "proc-only")
        self.assert_target_finishes(target)

    def test_zombie_is_reported_as_a_zombie(self):
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        deadline = time.monotonic() + 10
        while process_state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            code, text = collect(child.pid, self.out)
        finally:
            child.wait()
        self.assertEqual(code, 1, text)
        self.assertIn("zombie", text)
        dump = load_dump(self.out, pid=child.pid)
        self.assertEqual([t["state"] for t in dump["threads"]], ["Z"])

    def test_already_traced_process_names_its_tracer(self):
        target = self.start_target()
        tracer = subprocess.Popen(["strace", "-f", "-o", "/dev/null", "-p", str(target.pid)],
                                  stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (tracer.kill(), tracer.communicate()))
        # strace -f attaches thread by thread: wait until it holds every one (a loaded machine is slow).
        deadline = time.monotonic() + 60
        tasks = Path(f"/proc/{target.pid}/task")
        def untraced():
            return [t for t in tasks.iterdir() if "TracerPid:\t0\n" in (t / "status").read_text()]
        while untraced() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(untraced(), [], "strace did not attach to every thread within 60 s")
        code, text = collect(target.pid, self.out)
        self.assertEqual(code, 1, text)
        self.assertIn(f"already traced by pid {tracer.pid} (strace)", text)
        dump = load_dump(self.out, pid=target.pid)
        self.assertGreaterEqual(len(dump["threads"]), 4)
        tracer.terminate()
        tracer.wait()
        self.assert_target_finishes(target)

    def test_threads_coming_and_going_during_the_attach(self):
        target = self.start_target("--churn")
        for _ in range(5):
            code, text = collect(target.pid, self.out)
            self.assertEqual(code, 0, text)
            dump = load_dump(self.out, pid=target.pid)
            self.assertIn("churn-0", [t["name"] for t in dump["threads"]], describe(dump))
        self.assert_target_finishes(target)

    def test_missing_debugger_is_a_note_and_stacks_are_still_there(self):
        target = self.start_target()
        code, text = collect(target.pid, self.out, backend="sim", env={"HANGWATCH_DEBUGGER": "/nonexistent"})
        self.assertEqual(code, 3, text)
        dump = load_dump(self.out, pid=target.pid)
        debugger = next(p for p in dump["phases"] if p["name"] == "debugger")
        self.assertFalse(debugger["ok"])
        self.assertIn("/nonexistent", debugger["error"])
        self.assertTrue(any(f["kind"] == "python" for t in dump["threads"] for f in t["frames"]) or
                        all(t["frames"] for t in dump["threads"]), describe(dump))
        self.assert_target_finishes(target)

    def test_hung_debugger_is_killed_at_the_time_bound_and_the_target_runs_on(self):
        target = self.start_target()
        start = time.monotonic()
        code, text = collect(target.pid, self.out, backend="sim", extra=["--timeout-debugger", "1"],
                             env={"HANGWATCH_DEBUGGER": str(PROGRAMS / "stuck_debugger.py")})
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(code, 3, text)
        dump = load_dump(self.out, pid=target.pid)
        debugger = next(p for p in dump["phases"] if p["name"] == "debugger")
        self.assertIn("hard time bound", debugger["error"])
        self.assert_target_finishes(target)


class TriggerByHand(unittest.TestCase):
    def test_trigger_creates_once_then_refuses(self):
        if not os.path.exists(forensics_binary()):
            self.skipTest("forensics not built")
        job = tempfile.mkdtemp(prefix="hangwatch-trigger-")
        self.addCleanup(shutil.rmtree, job, True)
        first = subprocess.run([forensics_binary(), "trigger", job], capture_output=True, text=True)
        self.assertEqual(first.returncode, 0, first.stderr)
        record = json.loads((Path(job) / "TRIGGER.json").read_text())
        self.assertEqual(record["reason"], "manual")
        self.assertIsNone(record["rank"])
        second = subprocess.run([forensics_binary(), "trigger", job], capture_output=True, text=True)
        self.assertNotEqual(second.returncode, 0)
        self.assertIn("exists already", second.stderr)

    def test_every_contract_subcommand_documents_itself(self):
        if not os.path.exists(forensics_binary()):
            self.skipTest("forensics not built")
        top = subprocess.run([forensics_binary(), "--help"], capture_output=True, text=True)
        self.assertEqual(top.returncode, 0)
        for cmd in ("report", "analyze", "collect", "timeline", "trigger"):
            self.assertIn(cmd, top.stdout)
            r = subprocess.run([forensics_binary(), cmd, "--help"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, cmd)
            self.assertIn(f"forensics {cmd}", r.stdout + r.stderr)
            self.assertNotIn("not implemented", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
