"""cuda backend, kernel side (cuda-gdb): where the hung NCCL kernel's waiting threads stand.

NCCL's device code is built -O3 without -G/-lineinfo: no variables, no ncclShmem, only
registers, SASS and the function names of the ELF symbols. What can be read honestly:
  - in ring SIMPLE primitives with one recv peer (ring prev) and one send peer (ring next),
    thread 0 waits on the recv tail and thread 1 on the send head (prims_simple.h: tid <
    nrecv waits on recv, nrecv <= tid < nrecv+nsend on send). Nothing else follows that
    rule (trees, NVLS, CollNet, PAT, SendRecv's warp groups, LL/LL128 flags in the buffer):
    those blocks are listed as not read, with the reason;
  - in a waiting thread, the spin loop at its PC (spin_loop.py): the load's destination is
    the counter it saw, the compare's other operand the counter it needs, the load's
    address the counter's location: the same pointer NCCL's host copy of conn.head/tail
    holds, which is how cuda_backend joins a view to a communicator, channel and peer.
Symmetric-memory kernels (ncclSymkDevKernel_*) have no ring connections: named, not read.
UNTESTED ON HARDWARE: the logic runs here against a fake cuda-gdb (tests/test_cuda_backend.py).
Plain Python: the debugger comes in as an object (cuda_gdb.CudaGdb, or a test's fake)."""
from . import cuda_kernels, spin_loop
from .process_memory import MemoryReadError

DISASSEMBLY_WINDOW = 48  # instructions either side of the PC
MAX_BLOCKS = 64          # NCCL launches one block per channel, MAXCHANNELS = 64
RING_RULE_COLLECTIVES = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce")
RING_SIMPLE_THREADS = ((0, "recv"), (1, "send"))


class DebuggerCommandError(Exception):
    """A cuda-gdb command failed (no such block, no such register, ...)."""


def kernel_kind(name):
    if name.startswith("ncclSymkDevKernel"):
        return "symmetric"
    if name.startswith("ncclDevKernel"):
        return "collective"
    return None


def ring_simple_rule(collective, algorithm, protocol):
    """None when the block's thread 0 waits on the recv tail and thread 1 on the send head
    (ring SIMPLE, one peer each way), else why the rule does not hold."""
    if protocol is None or algorithm is None:
        return "no ncclDevFunc_ frame in the backtrace: algorithm and protocol unknown"
    if algorithm != "RING":
        return f"{algorithm} algorithm: its threads' roles are not thread 0 recv / thread 1 send"
    if protocol != "SIMPLE":
        return f"RING {protocol}: progress is in flags inside the receive buffer, not in a head/tail counter"
    if collective not in RING_RULE_COLLECTIVES:
        return f"{collective or 'unknown collective'} over RING SIMPLE: not one recv and one send peer per block"
    return None


class CudaKernelReader:
    name = "cuda-registers"

    def __init__(self, cuda):
        self.cuda = cuda
        self.errors = []
        self.not_read = []  # sentences: what was there and why it was not read
        self.kernels = []   # {"kernel", "name", "kind", "blocks", "read"}
        # Threads of a readable block found past their wait (at a barrier, copying, done): not
        # blocked on that side, which is an answer, not a failure to read.
        self.not_waiting = []

    def read(self):
        """Device views: {"kernel", "kernel_name", "block", "thread", "side", "observed",
        "target", "counter_address", "counter_in_memory", "function", "collective",
        "algorithm", "protocol"}, one per waiting thread whose spin loop was found."""
        views = []
        try:
            rows = cuda_kernels.parse_info_cuda_kernels(self.cuda.kernels_text())
        except DebuggerCommandError as e:
            self.errors.append(f"info cuda kernels: {e}")
            return views
        try:
            for k in rows:
                kind = kernel_kind(k["name"])
                if kind is None:
                    continue
                entry = {"kernel": k["kernel"], "name": k["name"], "kind": kind, "blocks": k["grid_dim"][0], "read": 0}
                self.kernels.append(entry)
                if kind == "symmetric":
                    self.not_read.append(f"kernel {k['kernel']} {k['name']}: symmetric-memory kernel, it has no ring "
                                         "connections (head/tail) to read")
                    continue
                for block in range(min(k["grid_dim"][0], MAX_BLOCKS)):
                    found = self._block(k, block)
                    entry["read"] += bool(found)
                    views.extend(found)
        finally:
            self.cuda.host_focus()
        return views

    def _block(self, k, block):
        where = f"kernel {k['kernel']} {k['name']} block {block}"
        try:
            self.cuda.focus(k["kernel"], block, 0)
            frames = self.cuda.frames()
        except DebuggerCommandError as e:
            self.not_read.append(f"{where}: cannot focus thread 0 ({e})")
            return []
        algorithm, protocol = cuda_kernels.protocol_from_backtrace("", frames)
        collective = _collective(frames) or (cuda_kernels.parse_nccl_function(k["name"]) or {}).get("collective")
        reason = ring_simple_rule(collective, algorithm, protocol)
        if reason:
            self.not_read.append(f"{where}: not read: {reason}")
            return []
        views = []
        for thread, side in RING_SIMPLE_THREADS:
            try:
                self.cuda.focus(k["kernel"], block, thread)
                view = self._waiting_thread(where, thread, side)
            except (DebuggerCommandError, MemoryReadError) as e:
                self.not_read.append(f"{where} thread {thread} ({side}): {e}")
                continue
            if view is None:
                continue
            view.update({"kernel": k["kernel"], "kernel_name": k["name"], "block": block, "thread": thread,
                         "side": side, "collective": collective, "algorithm": algorithm, "protocol": protocol,
                         "function": (self.cuda.frames() or [""])[0]})
            views.append(view)
        return views

    def _waiting_thread(self, where, thread, side):
        pc = self.cuda.register("pc")
        loop = spin_loop.find_spin_loop(spin_loop.parse_disassembly(
            self.cuda.instructions(pc - 16 * DISASSEMBLY_WINDOW, 2 * DISASSEMBLY_WINDOW)), pc)
        if loop is None:
            self.not_waiting.append(f"{where} thread {thread} ({side}): not in a counter wait loop at pc {pc:#x}")
            return None
        if len(loop["target_regs"]) != 2 or not loop["address_reg"]:
            self.not_read.append(f"{where} thread {thread} ({side}): wait loop at pc {pc:#x} without a 64-bit "
                                 "compare and a register address")
            return None
        observed = spin_loop.combine_u64(*(self.cuda.register(r) for r in loop["observed_regs"]))
        target = spin_loop.combine_u64(*(self.cuda.register(r) for r in loop["target_regs"]))
        low = int(loop["address_reg"][1:])
        address = spin_loop.combine_u64(self.cuda.register(f"R{low}"), self.cuda.register(f"R{low + 1}"))
        address += loop["address_offset"]
        try:
            in_memory = self.cuda.device_u64(address)
        except (MemoryReadError, DebuggerCommandError):
            in_memory = None
        # recv: the loaded tail against step + StepPerSlice. send: the loaded head against
        # step + StepPerSlice - NCCL_STEPS (the compiler folds the constant when it compares
        # the loaded register itself, which is what find_spin_loop requires): the head needed.
        return {"observed": observed, "target": target, "counter_address": address, "counter_in_memory": in_memory,
                "pc": pc}


def _collective(frames):
    for frame in frames:
        info = cuda_kernels.parse_nccl_function(frame or "")
        if info and info["kind"] == "function" and info["collective"]:
            return info["collective"]
    return None
