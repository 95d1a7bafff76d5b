"""cuda backend, kernel side (cuda-gdb): where the hung NCCL kernel's waiting threads stand.

NCCL's device code is built -O3 without -G/-lineinfo: no variables, no ncclShmem, only
registers, SASS and the function names of the ELF symbols. What can be read honestly:
  - in ring SIMPLE primitives with one recv peer (ring prev) and one send peer (ring next),
    thread 0 waits on the recv tail and thread 1 on the send head (prims_simple.h: tid <
    nrecv waits on recv, nrecv <= tid < nrecv+nsend on send);
  - in tree SIMPLE AllReduce (all_reduce.h runTreeSplit), the same rule in each of its two
    groups: reduce-up from thread 0, broadcast-down from nthreadsSplit (tree_splits); which
    connection a found wait is on comes from its counter's address, not its index;
  - in PAT SIMPLE AllGather/ReduceScatter (all_gather.h, reduce_scatter.h: 512 worker threads
    in groups of 512 / parallelFactor), each group's thread 0 waits on a recv tail and thread 2
    on a send head (prims_simple.h PatMode roles); the parallel factor is not in a register,
    so every warp's threads 0 and 2 are probed, and the address again says which connection;
  - in SendRecv (sendrecv.h: each work's send warps, then its receive warps, each a primitive
    whose thread 0 waits: FanAsymmetric<0,1> on the send head, <1,0> on the recv tail), every
    warp's thread 0 is probed; the address says which peer's p2p connection (connector 1).
    Nothing else is read (NVLS, CollNet, LL/LL128 flags in the buffer): those blocks are
    listed as not read, with the reason;
  - in a waiting thread, the spin loop at its PC (spin_loop.py, checked against NCCL 2.28's
    sm_90 SASS): the load's destination is the counter it saw, the compare's other operand
    the step it needs (less what was added to the counter before the compare: NCCL_STEPS on
    the send side), the load's address the counter's location: the same pointer NCCL's host
    copy of conn.head/tail holds, which is how cuda_backend joins a view to a communicator,
    channel and peer. Values the compiler keeps in local memory are read there, an address
    it reloads from shared memory there; registers mid-update at the PC are not read as if
    they held them.
Symmetric-memory kernels (ncclSymkDevKernel_*) have no ring connections: named, not read.
UNTESTED ON HARDWARE: the logic runs here against a fake cuda-gdb (tests/test_cuda_backend.py).
Plain Python: the debugger comes in as an object (cuda_gdb.CudaGdb, or a test's fake)."""
from . import cuda_kernels, spin_loop
from .process_memory import MemoryReadError

DISASSEMBLY_WINDOW = 48  # instructions either side of the PC
MAX_BLOCKS = 64          # NCCL launches one block per channel, MAXCHANNELS = 64
RING_RULE_COLLECTIVES = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce")
RING_SIMPLE_THREADS = ((0, "recv"), (1, "send"))
NCCL_MAX_TREE_ARITY = 3  # src/include/device.h: a tree node's children
WARP_SIZE = 32
NCCL_PAT_NWORKERS = 512  # src/include/collectives.h: PAT's worker threads, from thread 0
PAT_COLLECTIVES = ("AllGather", "ReduceScatter")


class DebuggerCommandError(Exception):
    """A cuda-gdb command failed (no such block, no such register, ...)."""


def kernel_kind(name):
    if name.startswith("ncclSymkDevKernel"):
        return "symmetric"
    if name.startswith("ncclDevKernel"):
        return "collective"
    return None


def _algorithm_rule(collective, algorithm, protocol, want, collectives, why):
    """None when the block runs `want` over SIMPLE for one of `collectives`, else why not."""
    if algorithm != want:
        return f"{algorithm} algorithm"
    if protocol != "SIMPLE":
        return f"{want} {protocol}: {why[0]}"
    if collective not in collectives:
        return f"{collective or 'unknown collective'} over {want}: {why[1]}"
    return None


def tree_simple_rule(collective, algorithm, protocol):
    """None when the block runs NCCL's tree AllReduce over SIMPLE (all_reduce.h runTreeSplit, the
    function CUDA >= 11.4 builds), whose waiting threads are known from prims_simple.h, else why
    not."""
    return _algorithm_rule(collective, algorithm, protocol, "TREE", ("AllReduce",),
                           ("progress is in flags inside the receive buffer, not in a head/tail counter",
                            "only AllReduce runs the tree"))


def tree_splits(block_threads):
    """Where runTreeSplit's broadcast-down threads may start: nthreadsSplit (all_reduce.h, SIMPLE:
    nthreads/2, plus 64 from 256 on) for the thread counts the work may run with, most likely
    first. NCCL 2.28's tree always runs NCCL_MAX_NTHREADS (src/enqueue.cc: "Tree now uses all
    threads always"), the block's own count; older NCCLs halve it for small sizes while it is a
    multiple of 128, so those come after."""
    out = []
    n = block_threads
    while n >= 2 * WARP_SIZE:
        split = n // 2 + (64 if n // 2 >= 256 else 0)
        if split not in out:
            out.append(split)
        if n % 128:
            break
        n //= 2
    return out


def tree_threads(split):
    """Threads that may wait on a tree connection (prims_simple.h: tid < nrecv waits on a recv
    tail, nrecv <= tid < nrecv + nsend on a send head). The reduce-up group (or a root's one
    group) from thread 0: up to 3 children in, the parent out; the broadcast-down group from
    `split`: the parent in, up to 3 children out. Which connection each waits on is what its
    spin loop's address says (joined with NCCL's host copy), not its index."""
    first = list(range(NCCL_MAX_TREE_ARITY + 1))  # 3 in and 1 out, or a root's 2 in and 2 out
    return first + ([split + i for i in range(1 + NCCL_MAX_TREE_ARITY)] if split is not None else [])


def pat_simple_rule(collective, algorithm, protocol):
    """None when the block runs NCCL's PAT over SIMPLE (the only protocol PAT has), whose
    waiting threads are known from prims_simple.h's PatMode roles, else why not."""
    return _algorithm_rule(collective, algorithm, protocol, "PAT", PAT_COLLECTIVES,
                           ("not a protocol NCCL runs PAT with", "only AllGather and ReduceScatter run PAT"))


def pat_threads():
    """Threads that may wait on a PAT connection: a group's tidInGroup 0 (RoleWaitRecv, a recv
    tail) and 2 (RoleWaitSend, a send head), groups of groupSize = NCCL_PAT_NWORKERS /
    (WARP_SIZE * parallelFactor) * WARP_SIZE threads. The factor is in shared memory, which
    nothing names in an -O3 kernel, so each warp's first thread and third are candidates: a
    thread that is not its group's waiter is at a barrier or copying, never in a counter loop."""
    return [w + i for w in range(0, NCCL_PAT_NWORKERS, WARP_SIZE) for i in (0, 2)]


def sendrecv_threads(block_threads):
    """Threads that may wait on a p2p connection: sendrecv.h gives each work whole warps (its
    sends' first, then its receives'), and a primitive with one peer waits from its thread 0,
    so every warp's first thread is a candidate; which peer and side is its counter's address."""
    return list(range(0, max(block_threads, WARP_SIZE), WARP_SIZE))


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
        # Blocks that run LL or LL128, not read: their kernels write no tail (prims_ll.h,
        # prims_ll128.h), so a connection's tail is an older SIMPLE collective's (cuda_backend).
        self.flag_protocol_blocks = []
        self._tree_split = {}  # kernel -> where its tree blocks' broadcast-down group starts

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
        # A kernel specialized for one work runs it inline, with no ncclDevFunc_ frame (NCCL's
        # ncclKernelMain, SpecializedRunWorkBatch): then the kernel's own name says which one.
        # Only where the backtrace shows the kernel's own frame: an unsymbolized or empty one
        # says nothing of what runs.
        kernel_frame = any((f or "").startswith(k["name"]) for f in frames)
        algorithm, protocol = cuda_kernels.protocol_from_backtrace(k["name"] if kernel_frame else "", frames)
        collective = _collective(frames) or (cuda_kernels.parse_nccl_function(k["name"]) or {}).get("collective")
        if collective == "SendRecv":
            return self._sendrecv_block(k, block, where)
        if algorithm == "TREE" and not tree_simple_rule(collective, algorithm, protocol):
            return self._tree_block(k, block, where, collective, algorithm, protocol)
        if algorithm == "PAT" and not pat_simple_rule(collective, algorithm, protocol):
            return self._pat_block(k, block, where, collective, algorithm, protocol)
        reason = ring_simple_rule(collective, algorithm, protocol)
        if reason:
            if algorithm == "TREE":
                reason = tree_simple_rule(collective, algorithm, protocol)
            elif algorithm == "PAT":
                reason = pat_simple_rule(collective, algorithm, protocol)
            self.not_read.append(f"{where}: not read: {reason}")
            if protocol in ("LL", "LL128"):
                self.flag_protocol_blocks.append(f"{where} ({algorithm} {protocol})")
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

    def _tree_block(self, k, block, where, collective, algorithm, protocol):
        """A tree block's waiting threads, found by probing the indices a wait may sit at; the
        split of its two groups is found once per kernel (every block runs one work's nWarps)."""
        known = self._tree_split.get(k["kernel"])
        splits = [known] if known is not None else tree_splits(k.get("block_dim", (0,))[0]) or [None]
        views = []
        probed = set()
        for split in splits:
            found_here = False
            for thread in tree_threads(split):
                if thread in probed:
                    continue
                probed.add(thread)
                view = self._probe(k, block, where, thread, (collective, algorithm, protocol))
                if view is None:
                    continue
                found_here = found_here or (split is not None and thread >= split)
                views.append(view)
            if found_here:
                self._tree_split[k["kernel"]] = split
                break
        if not views:
            self.not_waiting.append(f"{where}: TREE block, no thread found in a counter wait loop (threads "
                                    f"{sorted(probed)} probed)")
        return views

    def _pat_block(self, k, block, where, collective, algorithm, protocol):
        """A PAT block's waiting threads: each warp's threads 0 and 2 of the workers probed."""
        threads = [t for t in pat_threads() if t < k.get("block_dim", (NCCL_PAT_NWORKERS,))[0]]
        views = [v for v in (self._probe(k, block, where, t, (collective, algorithm, protocol)) for t in threads) if v]
        if not views:
            self.not_waiting.append(f"{where}: PAT block, no worker thread found in a counter wait loop (each "
                                    f"warp's threads 0 and 2 of {len(threads)} probed)")
        return views

    def _sendrecv_block(self, k, block, where):
        """A SendRecv block's waiting threads: every warp's thread 0 probed. NCCL runs SendRecv
        as RunWorkBatch<SendRecv, RING, SIMPLE>, each work with its own protocol (SIMPLE or LL:
        an LL receive polls flags in the buffer and is not found; an LL send waits on its head)."""
        threads = sendrecv_threads(k.get("block_dim", (0,))[0])
        views = [v for v in (self._probe(k, block, where, t, ("SendRecv", "RING", "")) for t in threads) if v]
        if not views:
            self.not_waiting.append(f"{where}: SendRecv block, no warp's first thread found in a counter wait loop "
                                    f"({len(threads)} probed)")
        return views

    def _probe(self, k, block, where, thread, what):
        """The view of `thread` if it waits in a counter loop; its side is its counter's (the
        join with NCCL's host copy says recv tail or send head), not its index's."""
        collective, algorithm, protocol = what
        try:
            self.cuda.focus(k["kernel"], block, thread)
            view = self._waiting_thread(where, thread, None, quiet=True)
        except (DebuggerCommandError, MemoryReadError):
            return None  # no such thread (a smaller block), or unreadable: not a wait found
        if view is None:
            return None
        view.update({"kernel": k["kernel"], "kernel_name": k["name"], "block": block, "thread": thread,
                     "side": None, "collective": collective, "algorithm": algorithm, "protocol": protocol,
                     "function": (self.cuda.frames() or [""])[0]})
        return view

    def _waiting_thread(self, where, thread, side, quiet=False):
        pc = self.cuda.register("pc")
        loop = spin_loop.find_spin_loop(spin_loop.parse_disassembly(
            self.cuda.instructions(pc - 16 * DISASSEMBLY_WINDOW, 2 * DISASSEMBLY_WINDOW)), pc)
        who = f"{where} thread {thread}" + (f" ({side})" if side else "")
        if loop is None:
            if not quiet:
                self.not_waiting.append(f"{who}: not in a counter wait loop at pc {pc:#x}")
            return None
        if "unmatched" in loop:
            self.not_read.append(f"{who}: polls memory in a loop at pc {pc:#x} ({loop['unmatched']}) whose compare "
                                 "is not a 64-bit counter's against a step (LL flags, a FIFO): not read")
            return None
        if not loop["address_reg"]:
            self.not_read.append(f"{who}: wait loop at pc {pc:#x} loads its counter without a register address")
            return None
        stale = loop["not_live"]
        if stale["target"]:
            self.not_read.append(f"{who}: wait loop at pc {pc:#x}: the step it needs is mid-update in "
                                 f"{', '.join(stale['target'])} at this pc: not read")
            return None
        address = self._u64_of(loop["address_reg"], loop["address_slot"], bool(stale["address"]))
        if address is None and loop.get("address_shared"):
            base, offset = loop["address_shared"]
            address = self.cuda.shared_u64(self.cuda.register(base) + offset)
        if address is None:
            self.not_read.append(f"{who}: wait loop at pc {pc:#x}: its counter's address is not in "
                                 f"{loop['address_reg']} at this pc, nor kept in local or shared memory: not read")
            return None
        address += loop["address_offset"]
        try:
            in_memory = self.cuda.device_u64(address)
        except (MemoryReadError, DebuggerCommandError):
            in_memory = None
        observed = self._u64_of(loop["observed_regs"][0], loop["observed_slot"], bool(stale["observed"]))
        if observed is None:
            observed = in_memory  # the counter itself, read after the loop's last load of it
        if observed is None:
            self.not_read.append(f"{who}: wait loop at pc {pc:#x}: the counter it saw is not in a register at "
                                 f"this pc and {address:#x} is not readable: not read")
            return None
        # The compare is (counter + added) against the step needed + StepPerSlice: recv adds 0
        # (the tail needed), send adds NCCL_STEPS (prims_simple.h: connStepCache + NCCL_STEPS <
        # step + StepPerSlice), so the head needed is the compared step minus what was added.
        added = loop["added"]
        added = self.cuda.register(added) if isinstance(added, str) else added
        target = max(0, spin_loop.combine_u64(*(self.cuda.register(r) for r in loop["target_regs"])) - added)
        return {"observed": observed, "target": target, "counter_address": address, "counter_in_memory": in_memory,
                "pc": pc}

    def _u64_of(self, low, slot, stale):
        """A 64-bit value the loop keeps in register pair `low`, or when those registers do not
        hold it at the pc, in local memory at R1 + slot; None when neither."""
        if not stale:
            n = int(low[1:])
            return spin_loop.combine_u64(self.cuda.register(f"R{n}"), self.cuda.register(f"R{n + 1}"))
        if slot is None:
            return None
        return self.cuda.local_u64(self.cuda.register("R1") + slot)


def _collective(frames):
    for frame in frames:
        info = cuda_kernels.parse_nccl_function(frame or "")
        if info and info["kind"] == "function" and info["collective"]:
            return info["collective"]
    return None
