"""A dump folder on shared storage that fails (issue #44 item 3): stalled forever, full in the
middle of a dump, read-only from the start, slow. The training job is never harmed, no
application thread waits on the folder, and no dump is lost: what the folder cannot take goes
to the node-local fallback (HANGWATCH_FALLBACK_DIR), and `forensics report --fallback` reads both.

The folders are made in this test's own mount namespace (entered once, at module set-up, so
that the job, its collectors and the report see the same mounts, and they all go when the test
ends): faultyfs (tests/programs/faultyfs.c, FUSE) for stalls, slowness and errors, tmpfs with a
size limit for a full folder, a read-only bind mount."""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from e2e_case import E2ECase
from harness import MpiJob, ring_train_binary
from report_jobs import JOB_ID, SMALL_MODEL, build_dir, every_json_whole, forensics_binary

NRANKS = 4
CLONE_NEWNS = 0x00020000


def faultyfs_binary():
    return os.environ.get("FAULTYFS", str(build_dir() / "tests" / "e2e" / "faultyfs"))


def setUpModule():
    # Before any thread exists: unshare(CLONE_NEWNS) refuses a process with several.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise unittest.SkipTest(f"no mount namespace of our own: {os.strerror(ctypes.get_errno())}")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)


class FaultyMount:
    """faultyfs over a backing folder; `set(mode)` changes what its changes do (ok, stall,
    delay S, slow-writes S, eio, enospc)."""

    def __init__(self, root):
        self.backing = Path(root) / "backing"
        self.control = Path(root) / "control"
        self.mount = Path(root) / "shared"
        self.backing.mkdir()
        self.mount.mkdir()
        self.set("ok")
        self.proc = subprocess.Popen([faultyfs_binary(), str(self.backing), str(self.control), str(self.mount)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not os.path.ismount(self.mount):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise unittest.SkipTest(f"faultyfs did not mount (FUSE here?): {self.proc.stderr.read()}")
            time.sleep(0.05)

    def set(self, mode):
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(mode + "\n")
        tmp.rename(self.control)

    def close(self):
        self.set("ok")  # whatever is held goes on, so the mount can go
        subprocess.run(["fusermount3", "-u", "-z", str(self.mount)], capture_output=True)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()


def rank_pids(job):
    return job.pids()


def threads_in_uninterruptible_sleep(pids):
    """(pid, tid) -> thread name of each thread in uninterruptible sleep (D) right now."""
    asleep = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stat = (task / "stat").read_text()
                comm = (task / "comm").read_text().strip()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2] == "D":
                asleep[(pid, int(task.name))] = comm
    return asleep


def threads_blocked_in_the_kernel(pids, seconds=2.0, every=0.1):
    """(pid, thread name) of each thread in uninterruptible sleep (D) all through `seconds`.

    A thread waiting on a mount that stalls forever stays in D. One that writes the node-local
    fallback can be in D for a moment on a loaded machine (the local file system's own locks
    and journal), and is not blocked: one look would take it for one."""
    blocked = threads_in_uninterruptible_sleep(pids)
    deadline = time.monotonic() + seconds
    while blocked and time.monotonic() < deadline:
        time.sleep(every)
        now = threads_in_uninterruptible_sleep(pids)
        blocked = {key: comm for key, comm in blocked.items() if key in now}
    return sorted((pid, comm) for (pid, _), comm in blocked.items())


def state_and_parent(stat_path):
    """(state letter, parent pid) from a /proc stat file; nothing once the process is gone."""
    try:
        stat = Path(stat_path).read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def io_helpers(pids):
    """pid -> state of each rank's dump-folder helper process (`forensics io-helper`)."""
    helpers = {}
    for proc in Path("/proc").glob("[0-9]*"):
        got = state_and_parent(proc / "stat")
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if got and got[1] in pids and b"io-helper" in cmdline:
            helpers[int(proc.name)] = got[0]
    return helpers


def alive(pids):
    """The pids still running (neither gone nor a zombie)."""
    return [pid for pid in pids if (got := state_and_parent(f"/proc/{pid}/stat")) and got[0] != "Z"]


def traced_ranks(pids):
    traced = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if int(re.search(r"TracerPid:\s+(\d+)", status)[1]) != 0:
            traced.append(pid)
    return traced


def states_done(job_dir):
    ranks = Path(job_dir) / "ranks"
    done = set()
    for r in range(NRANKS):
        f = ranks / f"r{r:05d}.state.json"
        try:
            if json.loads(f.read_text()).get("state") == "done":
                done.add(r)
        except (OSError, ValueError):
            pass
    return done


class StorageCase(E2ECase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="hangwatch-storage-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.fallback_root = self.tmp / "local"
        self.prom = self.tmp / "prom"
        self.prom.mkdir()

    def faulty_mount(self):
        m = FaultyMount(self.tmp)
        self.addCleanup(m.close)
        return m

    def env(self, dump_root, faults="", deadline_s=2, timeout_s=3):
        env = report_jobs.watchdog_env(dump_root, timeout_s=timeout_s, faults=faults)
        env.update({"HANGWATCH_FALLBACK_DIR": str(self.fallback_root), "HANGWATCH_STORAGE_DEADLINE": str(deadline_s),
                    "HANGWATCH_METRICS_INTERVAL": "1", "HANGWATCH_PROMETHEUS_DIR": str(self.prom),
                    "HANGWATCH_WARN_AFTER": "0"})
        return env

    def job(self, env, steps, ranks_per_node=None):
        argv = [ring_train_binary(), "--steps", str(steps), *SMALL_MODEL]
        if ranks_per_node:
            # Each rank on a host of its own name (a UTS namespace): links between nodes are NET.
            env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
            argv = [sys.executable, str(report_jobs.AS_NODE), str(ranks_per_node), "--", *argv]
        job = MpiJob(NRANKS, argv, env=env)
        self.addCleanup(job.kill)
        return job

    def fallback_job(self):
        return self.fallback_root / JOB_ID

    def wait_for_states(self, folders, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = set().union(*(states_done(f) for f in folders))
            if done == set(range(NRANKS)):
                return done
            time.sleep(0.25)
        return set().union(*(states_done(f) for f in folders))

    def report(self, job_dir, *extra):
        r = subprocess.run([forensics_binary(), "report", str(job_dir), "--format", "json", "--wait", "0",
                            "--no-save", *extra], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout), r.stderr

    def given_up_lines(self, out):
        return [line for line in out.splitlines() if "given up (" in line and line.startswith("hangwatch[rank")]

    def assert_each_rank_said_once(self, out, why):
        lines = self.given_up_lines(out)
        self.assertEqual(sorted(re.match(r"hangwatch\[rank (\d+)\]", line)[1] for line in lines),
                         [str(r) for r in range(NRANKS)], out[-4000:])
        for line in lines:
            self.assertIn(why, line)
            self.assertIn(str(self.fallback_job()), line)

    def assert_link_named(self, rep, link):
        v = rep["verdict"]
        self.assertEqual(v["kind"], "communication-hang", json.dumps(v, indent=1)[:3000])
        self.assertEqual(v["culprit_link"], link, json.dumps(v, indent=1)[:3000])
        self.assertEqual(rep["ranks_missing"], [])

    def step_seconds(self, job, first, last, timeout=120):
        """Seconds per step between every rank reporting `first` and every rank `last`."""
        def reached(step):
            return job.wait_for(lambda _: min(job.steps_done().values()) >= step, timeout)
        self.assertTrue(reached(first), job.output()[-3000:])
        start = time.monotonic()
        self.assertTrue(reached(last), job.output()[-3000:])
        return (time.monotonic() - start) / (last - first)


class StalledForever(StorageCase):
    def test_training_runs_on_and_the_dumps_go_to_the_fallback(self):
        mount = self.faulty_mount()
        dumps = mount.mount / "dumps"
        # The same job on healthy storage, then on storage that stalls once it runs (past the
        # deadline of 2 s before it ends).
        with self.job(self.env(dumps), steps=700) as healthy:
            healthy_step_s = self.step_seconds(healthy, 100, 600)
            self.assert_completes(healthy, 60)
        shutil.rmtree(mount.backing / "dumps")
        with self.job(self.env(dumps), steps=700) as job:
            self.assertTrue(job.wait_for(lambda _: min(job.steps_done().values()) >= 50, 60), job.output()[-3000:])
            mount.set("stall")
            stalled_step_s = self.step_seconds(job, 100, 600)
            ratio = stalled_step_s / healthy_step_s
            print(f"\nstep time on stalled storage / on healthy storage: {stalled_step_s * 1e3:.2f} ms / "
                  f"{healthy_step_s * 1e3:.2f} ms = {ratio:.2f}")
            self.assertLess(ratio, 1.5)
            self.assertTrue(job.wait_for(lambda out: len(self.given_up_lines(out)) == NRANKS, 30), job.output()[-3000:])
            # The helper processes wait on the stalled mount, never a thread of a rank: a rank
            # can still exit (Linux ends a process only once every thread has).
            pids = set(job.pids().values())
            self.assertEqual(threads_blocked_in_the_kernel(pids), [])
            helpers = io_helpers(pids)
            self.assertEqual(len(helpers), NRANKS, helpers)
            self.assertIn("D", helpers.values())
            # The job ends with the mount still stalled.
            out = self.assert_completes(job, 60)
        self.assert_each_rank_said_once(out, "stalled: ")
        # The helpers go with their ranks: each has its SIGHUP pending (PR_SET_PDEATHSIG). Once the
        # stalled call comes back or the mount goes, the helper ends its operation, or its bound
        # of 3 s ends it, and exits.
        for pid in helpers:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue  # gone already
            pending = int(re.search(r"ShdPnd:\s+([0-9a-f]+)", status)[1], 16) | \
                int(re.search(r"SigPnd:\s+([0-9a-f]+)", status)[1], 16)
            self.assertTrue(pending & (1 << (signal.SIGHUP - 1)), status)
        mount.close()
        deadline = time.monotonic() + 10
        while alive(helpers) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(alive(helpers), [])

    def test_a_hang_on_stalled_storage_is_dumped_whole_to_the_fallback_and_reported(self):
        mount = self.faulty_mount()
        dumps = mount.mount / "dumps"
        env = self.env(dumps, faults="dead-link=1->2@op=30")
        env["HANGWATCH_COLLECT_WAIT"] = "25"  # the debugger phase bounded to 10 s (it cannot attach, below)
        with self.job(env, steps=200) as job:
            self.assertTrue(job.wait_for(lambda _: min(job.steps_done().values()) >= 3, 60), job.output()[-3000:])
            mount.set("stall")
            done = self.wait_for_states([self.fallback_job()])
            out = job.output()
            self.assertEqual(done, set(range(NRANKS)), out[-4000:])
            pids = list(job.pids().values())
            # Every collector has ended within its bound: no rank is left under ptrace or stopped.
            self.assertEqual(traced_ranks(pids), [], out[-3000:])
            # No thread of a rank waits on the stalled mount (its helper process does).
            self.assertEqual(threads_blocked_in_the_kernel(pids), [])
            for r in range(NRANKS):
                prom = (self.prom / f"hangwatch_r{r:05d}.prom").read_text()
                self.assertIn(f'hangwatch_dump_fallback{{rank="{r}",host="', prom)
                self.assertRegex(prom, rf'hangwatch_dump_fallback{{[^}}]*dir="{re.escape(str(self.fallback_job()))}"}} 1')
            self.assert_each_rank_said_once(out, "stalled: ")
            ranks = self.fallback_job() / "ranks"
            for r in range(NRANKS):
                self.assertTrue((ranks / f"r{r:05d}.watchdog.json").exists(), r)
                self.assertTrue((ranks / f"r{r:05d}.forensics.json").exists(), r)
            self.assertEqual(json.loads((self.fallback_job() / "FALLBACK.json").read_text())["primary"],
                             str(dumps / JOB_ID))
            # What another node sees of the shared folder (the server's side): never a torn file.
            primary = mount.backing / "dumps" / JOB_ID
            self.assertEqual(every_json_whole(primary), [])
            # Every thread of the rank stops under ptrace: the debugger phase runs in full.
            logs = sorted((self.fallback_job() / "ranks").glob("*.collect.log"))
            self.assertEqual(len(logs), NRANKS)
            for log in logs:
                self.assertNotIn("hard time bound", log.read_text())
                self.assertRegex(log.read_text(), r"wrote .*r\d{5}\.forensics\.json")
            rep, err = self.report(primary, "--fallback", str(self.fallback_root))
            self.assertEqual(rep["ranks_missing"], [], err)
            self.assertEqual(rep["verdict"]["op"]["seq"], 30, json.dumps(rep["verdict"])[:2000])
            # Without the debugger's ring progress the link cannot be told on one node: never a wrong one.
            self.assertIn(rep["verdict"]["culprit_link"], (None, {"from": 1, "to": 2}), json.dumps(rep["verdict"])[:2000])
            self.assertTrue(any("come from the fallback folder" in p for p in rep["problems"]), rep["problems"])
            self.assertEqual(rep["job_dir"], str(primary))
            # The fallback folder alone says whose it is.
            _, err = self.report(self.fallback_job())
            self.assertIn(f"is the node-local fallback folder of {dumps / JOB_ID}", err)


class ReadOnlyAtStart(StorageCase):
    def test_one_line_at_start_then_everything_on_the_fallback(self):
        shared = self.tmp / "shared"
        (shared / "dumps").mkdir(parents=True)
        ro = self.tmp / "ro"
        ro.mkdir()
        subprocess.run(["mount", "--bind", str(shared), str(ro)], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", str(ro)])
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        env = self.env(ro / "dumps", faults="dead-link=2->3@op=12")
        env["HANGWATCH_ON_HANG"] = "abort"
        with self.job(env, steps=200) as job:
            code = job.wait_exit(120)
            out = job.output()
        self.assertIsNotNone(code, out[-3000:])
        self.assert_each_rank_said_once(out, "Read-only file system")
        # Not one line per write: nothing else about storage.
        noise = [line for line in out.splitlines() if line.startswith("hangwatch[rank") and "given up (" not in line
                 and ("not written" in line or "cannot" in line or "disabled" in line)]
        self.assertEqual(noise, [], out[-3000:])
        self.assertEqual(list((shared / "dumps").iterdir()), [])
        self.assertEqual(states_done(self.fallback_job()), set(range(NRANKS)))
        rep, _ = self.report(ro / "dumps" / JOB_ID, "--fallback", str(self.fallback_root))
        self.assert_link_named(rep, {"from": 2, "to": 3})


class FullMidDump(StorageCase):
    def test_no_torn_file_and_the_rest_in_the_fallback(self):
        shared = self.tmp / "shared"
        shared.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(shared)], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", str(shared)])
        with self.job(self.env(shared / "dumps", faults="dead-link=0->1@op=30"), steps=200) as job:
            self.assertTrue(job.wait_for(lambda _: min(job.steps_done().values()) >= 3, 60), job.output()[-3000:])
            # Fill it to the last few pages: the metrics lines still fit, a snapshot does not.
            free = os.statvfs(shared)
            with open(shared / "filler", "wb") as f:
                f.write(b"\0" * max(0, free.f_bavail * free.f_frsize - 12 * 1024))
            done = self.wait_for_states([shared / "dumps" / JOB_ID, self.fallback_job()])
            out = job.output()
            self.assertEqual(done, set(range(NRANKS)), out[-4000:])
        primary = shared / "dumps" / JOB_ID
        self.assertEqual(every_json_whole(primary), [])
        self.assertEqual([f.name for f in primary.rglob("*.tmp.*")], [])
        self.assertTrue(self.given_up_lines(out), out[-3000:])
        for line in self.given_up_lines(out):
            self.assertIn("No space left on device", line)
        rep, _ = self.report(primary, "--fallback", str(self.fallback_root))
        self.assert_link_named(rep, {"from": 0, "to": 1})
        # The shared folder alone: the ranks that fell back are missing, never half read.
        alone, _ = self.report(primary)
        self.assertTrue(set(alone["ranks_missing"]) <= set(range(NRANKS)), alone["ranks_missing"])


class RemovedBeforeTheHang(StorageCase):
    def test_the_dumps_are_whole_and_the_report_finds_them(self):
        """Somebody removes the job's folder while it trains (a scratch purge, a cleanup
        script): what the watchdog writes from then on is whole, and the report still names
        the link, reading the shared folder and the fallback together."""
        dumps = self.tmp / "shared" / "dumps"
        env = self.env(dumps, faults="dead-link=2->3@op=40")
        env["HANGWATCH_ON_HANG"] = "abort"  # the job ends by itself once every rank dumped
        with self.job(env, steps=200) as job:
            self.assertTrue(job.wait_for(lambda _: min(job.steps_done().values()) >= 3, 60), job.output()[-3000:])
            shutil.rmtree(dumps / JOB_ID)
            code = job.wait_exit(120)
            out = job.output()
        self.assertIsNotNone(code, out[-3000:])
        self.assertEqual(states_done(dumps / JOB_ID) | states_done(self.fallback_job()), set(range(NRANKS)),
                         out[-4000:])
        storage_lines = [line for line in out.splitlines() if line.startswith("hangwatch[rank")
                         and ("given up (" in line or "cannot" in line or "not written" in line)]
        # At most one line per rank about it, never one per operation.
        self.assertLessEqual(len(storage_lines), NRANKS, storage_lines)
        print("\n" + "\n".join(storage_lines))
        for folder in (dumps / JOB_ID, self.fallback_job()):
            if folder.exists():
                self.assertEqual(every_json_whole(folder), [])
                self.assertEqual([f.name for f in folder.rglob("*.tmp.*")], [])
        # The folder is made again as the ranks write (a missing folder is no failing storage):
        # the dumps are in it, or in the fallback for a rank that found it unwritable.
        fallback = ("--fallback", str(self.fallback_root)) if self.fallback_root.exists() else ()
        rep, _ = self.report(dumps / JOB_ID, *fallback)
        self.assert_link_named(rep, {"from": 2, "to": 3})


class SlowWrites(StorageCase):
    def test_dumps_complete_on_the_shared_folder_and_the_snapshots_give_the_first_verdict(self):
        mount = self.faulty_mount()
        dumps = mount.mount / "dumps"
        if not report_jobs.can_run_as_nodes():
            self.skipTest("no UTS namespace here: the ranks cannot run as two nodes")
        # 5 s per write against the default deadline of 10 s: slow, never stalled. Two nodes of
        # two: 1 -> 2 crosses them on the ring, which NCCL's profiler sees in the snapshots alone.
        env = self.env(dumps, faults="dead-link=1->2@op=30", deadline_s=10)
        env["NCCL_ALGO"] = "Ring"
        env["HANGWATCH_METRICS_INTERVAL"] = "10"
        with self.job(env, steps=200, ranks_per_node=2) as job:
            self.assertTrue(job.wait_for(lambda _: min(job.steps_done().values()) >= 3, 60), job.output()[-3000:])
            mount.set("slow-writes 5")
            primary = mount.backing / "dumps" / JOB_ID
            ranks = primary / "ranks"
            # Slow, never stalled: no rank gives the folder up (it would wait here for a snapshot
            # that went to the fallback).
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not all(
                    (ranks / f"r{r:05d}.watchdog.json").exists() for r in range(NRANKS)):
                self.assertEqual(self.given_up_lines(job.output()), [], job.output()[-4000:])
                time.sleep(0.25)
            # The first verdict comes while the collectors still write: from the snapshots, or
            # from the snapshots and the debugger dumps that landed meanwhile (a rank whose
            # snapshot write waited behind the others' can let their next files in first).
            first, _ = self.report(primary)
            self.assertEqual(first["verdict"]["culprit_link"], {"from": 1, "to": 2}, json.dumps(first["verdict"])[:2000])
            self.assertIn(first["verdict"]["source"], ("profiler", "debugger and profiler"),
                          json.dumps(first["verdict"])[:2000])
            # The snapshots alone name it, from NCCL's profiler: the job folder as it stood with
            # no debugger dump and no node summary in it.
            alone = self.tmp / "snapshots-alone"
            shutil.copytree(primary, alone, ignore=lambda folder, names: [
                n for n in names if n.endswith(".forensics.json") or n == "nodes" or ".tmp." in n])
            from_snapshots, _ = self.report(alone)
            self.assertEqual(from_snapshots["verdict"]["culprit_link"], {"from": 1, "to": 2},
                             json.dumps(from_snapshots["verdict"])[:2000])
            self.assertEqual(from_snapshots["verdict"]["source"], "profiler", json.dumps(from_snapshots["verdict"])[:2000])
            done = self.wait_for_states([primary], timeout=90)
            out = job.output()
            self.assertEqual(done, set(range(NRANKS)), out[-4000:])
        self.assertEqual(self.given_up_lines(out), [])
        self.assertFalse(self.fallback_job().exists())
        rep, _ = self.report(primary)
        self.assert_link_named(rep, {"from": 1, "to": 2})


if __name__ == "__main__":
    unittest.main()
