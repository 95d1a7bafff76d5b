"""The cuda backend end to end without a GPU: a live process with the real libnccl.so.2
loaded and a synthetic ncclComm in its memory (laid out with that library's offsets), a
watchdog snapshot whose comm table points at it, and `forensics collect --backend auto`.
Proves: the collector picks the cuda backend from the process, hands the comm table to the
script, runs gdb when there is no cuda-gdb and says what that leaves unread, and gdb walks
NCCL's structures in a real process with offsets from its DWARF. What needs a GPU (cuda-gdb,
device memory, a real hung kernel) is not tested here."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from harness import SOURCE_DIR, ring_train_binary

sys.path.insert(0, str(SOURCE_DIR / "gdb-scripts"))
sys.path.insert(0, str(SOURCE_DIR / "gdb-scripts" / "tests"))
import synthetic_nccl as syn  # noqa: E402
from hangwatch_gdb.nccl_host_layout import NcclHostLayout  # noqa: E402
from hangwatch_gdb.nccl_host_reader import CommAddress, NcclHostReader  # noqa: E402
from hangwatch_gdb.process_memory import ProcessMemory  # noqa: E402
from real_nccl import real_nccl  # noqa: E402
from test_cuda_backend import COMM_HASH, NCCL_ID, WATCHDOG_HASH, rank2_channels  # noqa: E402

TARGET = SOURCE_DIR / "tests" / "programs" / "nccl_memory_target.py"


def forensics_binary():
    default = Path(ring_train_binary()).resolve().parents[2] / "forensics" / "forensics"
    return os.environ.get("FORENSICS", str(default))


@unittest.skipIf(real_nccl() is None, "no libnccl.so.2 or no gdb on this machine")
class CudaBackendOnALiveProcessWithTheRealLibnccl(unittest.TestCase):
    def setUp(self):
        nccl = real_nccl()
        self.lib = nccl.lib
        self.synthetic = syn.SyntheticNccl(nccl.ptype, nccl.ptype_sizes)
        self.comm = syn.build_comm(self.synthetic, 2, 4, COMM_HASH, rank2_channels())
        self.expected, _ = NcclHostReader(ProcessMemory(self.synthetic.host), NcclHostLayout.from_json(nccl.layout_json),
                                          [CommAddress(self.comm, "watchdog", WATCHDOG_HASH, NCCL_ID)]).read()
        self.tmp = Path(tempfile.mkdtemp(prefix="cuda-backend-live-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        base, data = self.synthetic.host.span()
        (self.tmp / "span.bin").write_bytes(data)
        self.target = subprocess.Popen([sys.executable, str(TARGET), self.lib, f"{base:x}", str(self.tmp / "span.bin")],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(self._stop_target)
        line = self.target.stdout.readline()
        self.assertIn("ready", line, line + self.target.stdout.read() if self.target.poll() is not None else line)
        # gdb only: the shortfall of a node without cuda-gdb is part of what is tested.
        self.path_dir = self.tmp / "bin"
        self.path_dir.mkdir()
        (self.path_dir / "gdb").symlink_to(shutil.which("gdb"))

    def _stop_target(self):
        if self.target.poll() is None:
            self.target.stdin.close()
            try:
                self.target.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.target.kill()
                self.target.wait()
        self.target.stdout.close()

    def write_snapshot(self, comms):
        job = self.tmp / "job"
        (job / "ranks").mkdir(parents=True, exist_ok=True)
        snapshot = {"schema_version": 1, "identity": {"rank": 2, "world_size": 4, "pid": self.target.pid},
                    "comms": comms}
        (job / "ranks" / "r00002.watchdog.json").write_text(json.dumps(snapshot))
        return job

    def collect(self, job):
        env = {k: v for k, v in os.environ.items() if k != "HANGWATCH_DEBUGGER"}
        env["PATH"] = str(self.path_dir)
        run = subprocess.run([forensics_binary(), "collect", "--pid", str(self.target.pid), "--rank", "2", "--out",
                              str(job), "--backend", "auto", "--timeout-debugger", "120"],
                             capture_output=True, text=True, env=env, timeout=300)
        out = run.stdout + run.stderr
        if "Operation not permitted" in out and "ptrace" in out.lower():
            self.skipTest(f"ptrace not permitted here: {out[-500:]}")
        dump_path = job / "ranks" / "r00002.forensics.json"
        self.assertTrue(dump_path.exists(), out)
        dump = json.loads(dump_path.read_text())
        if os.environ.get("HANGWATCH_E2E_SHOW"):
            print(json.dumps({k: dump[k] for k in ("backend", "debugger", "errors", "ring_progress")}, indent=1))
        return run.returncode, dump, out

    def test_gdb_walks_the_communicator_of_the_comm_table_and_says_what_it_cannot_read(self):
        job = self.write_snapshot([{"hash": WATCHDOG_HASH, "rank": 2, "size": 4, "state": "live", "nccl_id": NCCL_ID,
                                    "address": f"{self.comm:#x}"}])
        code, dump, out = self.collect(job)
        self.assertEqual(dump["backend"], "cuda", out)
        self.assertEqual(Path(dump["debugger"]).name, "gdb")
        debugger = next(p for p in dump["phases"] if p["name"] == "debugger")
        self.assertTrue(debugger["ok"], debugger)
        self.assertEqual(code, 3, out)  # the cuda backend's own debugger was missing: degraded, and said
        errors = "\n".join(dump["errors"])
        self.assertIn("cuda-gdb is not on PATH", errors)
        self.assertIn("device memory not read", errors)
        self.assertIn("kernel not read: the debugger is gdb, not cuda-gdb", errors)
        self.assertEqual(len(dump["ring_progress"]), 2, errors)
        for got, want in zip(dump["ring_progress"], self.expected):
            for key in ("comm", "nccl_comm", "op", "seq", "channel", "rank", "prev", "next", "comm_size", "source",
                        "nccl_op_count"):
                self.assertEqual(got.get(key), want.get(key), key)
            for side in ("recv", "send"):
                self.assertEqual(got[side], want[side], side)
        r1 = dump["ring_progress"][1]
        self.assertEqual((r1["recv"]["transport"], r1["recv"]["observed_step"], r1["recv"]["base_step"]),
                         ("NET", 259, 257))
        self.assertIsNone(r1["send"]["observed_step"])  # P2P: device memory, which gdb cannot read
        self.assertIsNone(r1["seq"])

    def test_without_a_comm_table_the_frame_search_is_the_fallback_and_says_so(self):
        job = self.write_snapshot([])
        code, dump, out = self.collect(job)
        self.assertEqual(dump["backend"], "cuda", out)
        self.assertEqual(dump["ring_progress"], [])
        self.assertIn("fallback: `comm` variables in NCCL's frames found 0", "\n".join(dump["errors"]))


if __name__ == "__main__":
    unittest.main()
