"""cuda backend, kernel side (cuda-gdb only): for the hung ncclDevKernel_* grid, one block
per channel; in each block focus the waiting threads (SIMPLE: thread 0 recv tail,
thread 1 send head), find the spin loop at the stopped PC, and read the target step and
the observed counter from its registers, cross-checked with the counter in memory.
UNTESTED ON HARDWARE (issue 7 runs it); the text parsing it uses is unit-tested."""
import gdb

from . import cuda_kernels, ring_records, spin_loop

DISASSEMBLY_WINDOW = 48  # instructions either side of the PC


def _run(command):
    return gdb.execute(command, to_string=True)


def _register(name):
    return int(gdb.parse_and_eval("$" + name))


def _focus(kernel, block, thread):
    _run(f"cuda kernel {kernel} block ({block},0,0) thread ({thread},0,0)")


def _backtrace_names():
    names, frame = [], gdb.newest_frame()
    while frame is not None and len(names) < 16:
        names.append(frame.name())
        frame = frame.older()
    return names


def _read_u64(address):
    try:
        return int(gdb.parse_and_eval(f"*(unsigned long long*){address:#x}"))
    except gdb.error:
        return None


class CudaRingReader:
    def __init__(self):
        self.errors = []

    def read(self):
        records = []
        kernels = cuda_kernels.nccl_kernels(cuda_kernels.parse_info_cuda_kernels(_run("info cuda kernels")))
        for k in kernels:
            try:
                records.extend(self._kernel(k))
            except gdb.error as e:
                self.errors.append(f"kernel {k['kernel']} {k['name']}: {e}")
        return records

    def _kernel(self, k):
        nblocks = k["grid_dim"][0]
        records = []
        for block in range(nblocks):
            _focus(k["kernel"], block, 0)
            algorithm, protocol = cuda_kernels.protocol_from_backtrace(k["name"], _backtrace_names())
            channel = self._shmem_int("ncclShmem.channelId", block)
            record = ring_records.new_record("", k["name"], 0, channel, -1, 0, self._shmem_int("ncclShmem.channel.ring.prev", -1),
                                             self._shmem_int("ncclShmem.channel.ring.next", -1), "cuda-registers",
                                             algorithm or "", protocol or "")
            for thread, side in cuda_kernels.waiting_threads(protocol or "SIMPLE"):
                if side not in ("recv", "send"):
                    continue
                try:
                    _focus(k["kernel"], block, thread)
                    conn = self._waiting_connection(side, record)
                except gdb.error as e:
                    self.errors.append(f"block {block} thread {thread}: {e}")
                    continue
                if conn:
                    record[side] = conn
                    record["waiting_threads"].append({"tid": thread, "name": f"block {block}",
                                                      "function": (_backtrace_names() or [""])[0], "direction": side})
            records.append(record)
        return records

    def _shmem_int(self, expression, default):
        try:
            return int(gdb.parse_and_eval(expression))
        except gdb.error:
            return default

    def _waiting_connection(self, side, record):
        pc = _register("pc")
        text = _run(f"x/{2 * DISASSEMBLY_WINDOW}i {pc - 16 * DISASSEMBLY_WINDOW:#x}")
        loop = spin_loop.find_spin_loop(spin_loop.parse_disassembly(text), pc)
        if loop is None:
            self.errors.append(f"channel {record['channel']} {side}: no spin loop around pc {pc:#x}")
            return None
        observed = spin_loop.combine_u64(_register(loop["observed_regs"][0]), _register(loop["observed_regs"][1]))
        target = spin_loop.combine_u64(*(_register(r) for r in loop["target_regs"])) if len(loop["target_regs"]) == 2 else 0
        in_memory = None
        if loop["address_reg"]:
            base = spin_loop.combine_u64(_register(loop["address_reg"]),
                                         _register("R%d" % (int(loop["address_reg"][1:]) + 1)))
            in_memory = _read_u64(base + loop["address_offset"])
        peer = record["prev"] if side == "recv" else record["next"]
        if side == "recv":
            c = ring_records.recv_connection(peer, target - 1, observed, True)
        else:
            # The send wait compares head + NCCL_STEPS with step + StepPerSlice: target is already the head needed.
            c = ring_records.send_connection(peer, target - 1 + ring_records.NCCL_STEPS, observed, True)
        c["target_step"] = target
        if in_memory is not None:
            c["counter_in_memory"] = in_memory  # >= observed: the counter may have moved since the load
        return c
