"""The spin-loop matcher on the SASS NCCL really runs: the installed libnccl.so.2's sm_90
kernels, disassembled by NVIDIA's cuobjdump (scripts/install-deps.sh --tests puts it in the
deps cache). Every counter wait of the device functions the cuda-gdb reader reads (ring,
tree, PAT, SendRecv; prims_simple.h waitPeer and PAT's patCopy) is a loop around NCCL's
abort check (checkAbort: a spin count compared with NCCL_SPINS_BEFORE_CHECK_ABORT - 1 =
0x270f); the matcher must find in it the counter, its address and the step it needs, with
what the send side adds. Skips where cuobjdump or libnccl.so.2 is missing, unless
HANGWATCH_REQUIRE_CUOBJDUMP is set (CI installs it)."""
import collections
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hangwatch_gdb import spin_loop  # noqa: E402
from real_nccl import installed_nccl  # noqa: E402

CHECK_ABORT = "0x270f"


def cuobjdump():
    cache = os.environ.get("HANGWATCH_DEPS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hangwatch")
    for candidate in (os.path.join(cache, "cuda-binutils", "bin", "cuobjdump"), shutil.which("cuobjdump")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def sass(tool, lib, symbol):
    """cuobjdump's sm_90 SASS of one function, as cuda-gdb's `x/i` lines (address <+offset>:)."""
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
    out = subprocess.run([tool, "-sass", "-arch", "sm_90", "-fun", symbol, lib], capture_output=True, text=True,
                         timeout=120, env=env).stdout
    lines = []
    for line in out.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*(?:/\*.*\*/)?\s*$", line)
        if m:
            lines.append(f"   {int(m[1], 16):#018x} <+{int(m[1], 16)}>:\t{m[2]}")
    return spin_loop.parse_disassembly("\n".join(lines))


def wait_loops(instructions):
    """(start, end) of each loop around an abort check: the backward branch after the check
    whose target is before it."""
    loops = []
    for addr, text, _pred in instructions:
        if CHECK_ABORT not in text:
            continue
        for b_addr, b_text, _p in instructions:
            b = spin_loop._BRA.match(b_text)
            if b_addr > addr and b and int(b["target"], 16) < addr:
                loops.append((int(b["target"], 16), b_addr))
                break
    return loops


def matches(instructions):
    """For each wait loop: the match at every pc of it (None, unmatched, or a counter wait)."""
    out = []
    for start, end in wait_loops(instructions):
        pcs = [a for a, _t, _p in instructions if start <= a <= end]
        out.append(((start, end), [spin_loop.find_spin_loop(instructions, pc) for pc in pcs]))
    return out


@unittest.skipIf((cuobjdump() is None or installed_nccl() is None) and not os.environ.get("HANGWATCH_REQUIRE_CUOBJDUMP"),
                 "no cuobjdump (scripts/install-deps.sh --tests) or no libnccl.so.2 on this machine")
class RealNcclSass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool, cls.lib = cuobjdump(), installed_nccl()
        if cls.tool is None or cls.lib is None:
            raise AssertionError(f"HANGWATCH_REQUIRE_CUOBJDUMP is set: cuobjdump {cls.tool}, libnccl.so.2 {cls.lib}")
        env = dict(os.environ, PATH=os.path.dirname(cls.tool) + os.pathsep + os.environ.get("PATH", ""))
        symbols = subprocess.run([cls.tool, "-symbols", "-arch", "sm_90", cls.lib], capture_output=True, text=True,
                                 timeout=120, env=env).stdout
        cls.symbols = set(re.findall(r"(_Z\w+)", symbols))

    def function(self, name):
        symbol = next((s for s in sorted(self.symbols) if re.fullmatch(r"_Z\d+" + name + r"\w*", s)), None)
        self.assertIsNotNone(symbol, f"{name} is not in {self.lib}'s sm_90 code")
        return matches(sass(self.tool, self.lib, symbol))

    def waits(self, name):
        """The counter waits found: {(loop, added)}, how many pcs of them are read, and how many
        waits are read at every pc of theirs. A loop
        around an abort check that is not taken for a wait compares nothing with a step: each of
        its 64-bit compares is against zero or a constant (a pointer exchange, a FIFO slot), or
        between two values it loads itself (a FIFO's two ends)."""
        symbol = next(s for s in sorted(self.symbols) if re.fullmatch(r"_Z\d+" + name + r"\w*", s))
        instructions = sass(self.tool, self.lib, symbol)
        found, live, pcs, self.whole = set(), 0, 0, 0
        for loop, at_pcs in matches(instructions):
            waits = [m for m in at_pcs if m and "unmatched" not in m]
            if not waits:
                body = [t for a, t, _p in instructions if loop[0] <= a <= loop[1]]
                loaded = set().union(*[spin_loop.writes(t) for t in body if spin_loop._qualifying_load(t)])
                for t in body:
                    ops = spin_loop._operands(t)[2:4]
                    if t.startswith("ISETP") and ".U32" in t and all(re.fullmatch(r"R\d+", o) for o in ops):
                        self.assertLessEqual(set(ops), loaded, f"{name} loop {loop}: a wait not found? {t}")
                continue
            self.assertEqual(len(waits), len(at_pcs), f"{name} loop {loop}: matched at some pcs only")
            found.add((loop, waits[0]["added"] if isinstance(waits[0]["added"], int) else "register"))
            read = sum(not m["not_live"]["target"] and (not m["not_live"]["address"] or m["address_slot"] is not None
                                                        or m["address_shared"] is not None) for m in waits)
            pcs, live, self.whole = pcs + len(waits), live + read, self.whole + (read == len(waits))
        return found, live, pcs

    def test_the_ring_waits_are_found_on_both_sides_and_read_at_every_pc(self):
        found, live, pcs = self.waits("ncclDevFunc_AllReduce_Sum_f32_RING_SIMPLE")
        added = collections.Counter(a for _loop, a in found)
        self.assertGreaterEqual(len(found), 8)
        self.assertGreater(added[0], 0)                        # recv: the tail against step + StepPerSlice
        self.assertGreater(added[8] + added["register"], 0)    # send: head + NCCL_STEPS against it
        self.assertEqual(live, pcs)

    def test_the_tree_waits_are_found_with_the_counter_and_address_the_compiler_keeps_in_local_memory(self):
        found, live, pcs = self.waits("ncclDevFunc_AllReduce_Sum_f32_TREE_SIMPLE")
        self.assertGreaterEqual(len(found), 8)
        self.assertEqual(live, pcs)

    def test_pats_waits_are_found_and_read_where_the_step_needed_is_in_its_registers(self):
        found, live, pcs = self.waits("ncclDevFunc_AllGather_PAT_SIMPLE")
        self.assertEqual(sorted(a for _loop, a in found), [0, 8])  # patCopy: one recv wait, one send wait
        # The send wait is read at every pc (its address from shared memory where the register
        # holds something else); the recv wait recomputes its step from shared memory into
        # registers it reuses at once, so at most pcs its step is not read (and said so).
        self.assertEqual(self.whole, 1)
        self.assertLess(live, pcs)

    def test_sendrecv_waits_are_found_and_fifo_loops_are_not_taken_for_them(self):
        found, live, pcs = self.waits("ncclDevKernel_SendRecv")
        added = collections.Counter(a for _loop, a in found)
        self.assertGreater(added[0], 0)
        self.assertGreater(added[8], 0)
        self.assertEqual(live, pcs)  # one keeps its counter in local memory, its address copied from a pair
        # Loops that compare two values they both load with strong loads (a FIFO's head and
        # tail) wait for no step: never taken for a counter wait.
        instructions = sass(self.tool, self.lib, next(s for s in self.symbols if "ncclDevKernel_SendRecv" in s))
        fifo_loops = 0
        for (start, end), at_pcs in self.function("ncclDevKernel_SendRecv"):
            body = [t for a, t, _p in instructions if start <= a <= end]
            loaded = {spin_loop._qualifying_load(t)[0] for t in body if spin_loop._qualifying_load(t)}
            compares = [spin_loop._operands(t)[2:4] for t in body if t.startswith("ISETP") and ".U32" in t]
            if any(len(ops) == 2 and set(ops) <= loaded for ops in compares):
                fifo_loops += 1
                self.assertTrue(all(m is None or "unmatched" in m for m in at_pcs), (start, end))
        self.assertGreater(fifo_loops, 0)


if __name__ == "__main__":
    unittest.main()
