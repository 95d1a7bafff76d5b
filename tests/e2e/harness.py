"""Running multi-rank jobs from end-to-end tests: start under examples/mpirun.sh (or one
of the test launchers in launchers/) in a session of their own, follow their output, and
always kill every process of the session and every descendant of the launcher afterwards,
so a hung scenario never leaves ranks behind."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("HANGWATCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
MPIRUN = SOURCE_DIR / "examples" / "mpirun.sh"
LAUNCHERS = Path(__file__).resolve().parent / "launchers"
GDB_SCRIPT = Path(__file__).resolve().parent / "gdb_threads.py"


def ring_train_binary():
    return os.environ.get("RING_TRAIN", str(SOURCE_DIR / "build" / "examples" / "ring_train" / "ring_train"))


def train_py():
    return str(SOURCE_DIR / "examples" / "python_train" / "train.py")


def mpirun(nranks):
    return [str(MPIRUN), "-np", str(nranks)]


def torchrun_like(nranks, kill_grace=30, run_id="e2e-torchrun", max_restarts=0):
    """launchers/fake_torchrun.py: workers in sessions of their own, SIGTERM then SIGKILL on failure,
    then (with max_restarts) every worker started again with TORCHELASTIC_RESTART_COUNT + 1."""
    return [sys.executable, str(LAUNCHERS / "fake_torchrun.py"), "--nproc-per-node", str(nranks),
            "--kill-grace", str(kill_grace), "--run-id", run_id, "--max-restarts", str(max_restarts), "--"]


def srun_like(nranks, kill_wait=30, job_id="4242", kill_on_bad_exit=True):
    """launchers/fake_srun.py: SLURM_* variables; with kill_on_bad_exit (--kill-on-bad-exit) SIGTERM
    then SIGKILL on a bad exit, without it (Slurm's default KillOnBadExit=0) the others run on."""
    return [sys.executable, str(LAUNCHERS / "fake_srun.py"), "-n", str(nranks),
            *(["--kill-on-bad-exit"] if kill_on_bad_exit else []), "--kill-wait", str(kill_wait),
            "--job-id", job_id, "--"]


def descendant_pids(root):
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def session_pids(sid):
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Field 6 of stat is the session id; the command may contain spaces, so split after ')'.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            pids.append(int(entry.name))
    return pids


class MpiJob:
    """One job under mpirun, or under `launcher` (an argv prefix such as torchrun_like(n)).
    Use as a context manager: leaving it kills whatever still runs."""

    def __init__(self, nranks, argv, env=None, program="ring_train", launcher=None, wrap=()):
        """`wrap`: a command that runs the launcher, e.g. one that enters a mount namespace first."""
        self.nranks = nranks
        self.program = program
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.lines = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen([*wrap, *(launcher or mpirun(nranks)), *argv], env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def output(self):
        with self._cond:
            return "\n".join(self.lines)

    def wait_for(self, predicate, timeout):
        """Waits until predicate(output) holds; False on timeout or when the job ended first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate("\n".join(self.lines)):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return predicate("\n".join(self.lines))
                self._cond.wait(min(remaining, 0.2))
            return True

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def steps_done(self):
        """Highest step each rank reported done, -1 for ranks with none yet."""
        done = {r: -1 for r in range(self.nranks)}
        for m in re.finditer(rf"{self.program} rank=(\d+) step=(\d+) done", self.output()):
            done[int(m[1])] = max(done[int(m[1])], int(m[2]))
        return done

    def wait_until_stuck(self, last_step, timeout, quiet_seconds=2.0):
        """Waits until every rank has reported `last_step` (or `last_step` per rank as a
        dict), then checks that no rank gets further for `quiet_seconds`."""
        expected = last_step if isinstance(last_step, dict) else {r: last_step for r in range(self.nranks)}
        reached = self.wait_for(lambda _: all(self.steps_done()[r] >= s for r, s in expected.items()), timeout)
        if not reached:
            return False, f"ranks did not reach {expected}: {self.steps_done()}\n{self.output()[-3000:]}"
        time.sleep(quiet_seconds)
        done = self.steps_done()
        if any(done[r] != s for r, s in expected.items()) or self.proc.poll() is not None:
            return False, f"job kept going or ended: {done}, exit={self.proc.poll()}\n{self.output()[-3000:]}"
        return True, ""

    def pids(self):
        return {int(m[1]): int(m[2]) for m in re.finditer(rf"{self.program} rank=(\d+) pid=(\d+)", self.output())}

    def kill(self):
        # Ranks first, so that mpirun is still there to reap them; then mpirun itself. Workers
        # a launcher put in sessions of their own are found as its descendants.
        for pid in set(session_pids(self.proc.pid)) | set(descendant_pids(self.proc.pid)):
            if pid != self.proc.pid:
                _kill(pid)
        if self.wait_exit(3) is None:
            _kill(self.proc.pid)
        for pid in session_pids(self.proc.pid):
            _kill(pid)
        self.wait_exit(5)
        self._reader.join(5)
        if not self._reader.is_alive():
            self.proc.stdout.close()


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class PtraceDenied(Exception):
    pass


def gdb_threads(pid, timeout=60):
    """Every thread of `pid` as gdb sees it (see gdb_threads.py)."""
    result = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-x", str(GDB_SCRIPT)],
                            capture_output=True, text=True, timeout=timeout)
    text = result.stdout + result.stderr
    if "Operation not permitted" in text or "ptrace: " in text:
        raise PtraceDenied(f"gdb cannot attach to {pid}: {text.strip().splitlines()[-1] if text.strip() else ''}")
    m = re.search(r"HANGWATCH-E2E-THREADS-BEGIN\n(.*)\nHANGWATCH-E2E-THREADS-END", text, re.S)
    if not m:
        raise AssertionError(f"gdb gave no thread list for {pid}:\n{text[-3000:]}")
    return json.loads(m[1])


def frames_text(threads):
    return "\n".join(f"{t['lwp']} {t['name']}: {' <- '.join(t['frames'][:12])}" for t in threads)
