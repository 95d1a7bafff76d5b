"""A stand-in for cuda-gdb as cuda_ring_reader talks to it (cuda_gdb.CudaGdb's methods):
kernels, blocks and threads with a backtrace, registers and the SASS around their PC.
A waiting thread sits in NCCL's SIMPLE spin loop (the shape test_parsers.SPIN_LOOP has):
LD.E.64.STRONG.SYS R4, [R2.64+0x8]; ISETP pair against R6:R7; branch back."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hangwatch_gdb.cuda_ring_reader import DebuggerCommandError  # noqa: E402
from hangwatch_gdb.process_memory import MemoryReadError, ProcessMemory  # noqa: E402

LOOP_PC = 0x7fffd3a5c1c0
SPIN_LOOP = """\
   0x00007fffd3a5c180 <+384>:\tIADD3 R6, P0, R10, 0x1, RZ ;
   0x00007fffd3a5c190 <+400>:\tIADD3.X R7, RZ, R11, RZ, P0, !PT ;
   0x00007fffd3a5c1a0 <+416>:\tLD.E.64.STRONG.SYS R4, [R2.64+0x8] ;
   0x00007fffd3a5c1b0 <+432>:\tISETP.GE.U32.AND P0, PT, R4, R6, PT ;
=> 0x00007fffd3a5c1c0 <+448>:\tISETP.GE.U32.AND.EX P0, PT, R5, R7, PT, P0 ;
   0x00007fffd3a5c1d0 <+464>:\t@!P0 BRA 0x7fffd3a5c1a0 ;
   0x00007fffd3a5c1e0 <+480>:\tEXIT ;
"""
ELSEWHERE_PC = 0x7fffd3a00010
STRAIGHT_CODE = """\
=> 0x00007fffd3a00010 <+16>:\tBAR.SYNC.DEFER_BLOCKING 0x0 ;
   0x00007fffd3a00020 <+32>:\tEXIT ;
"""


def _split(value):
    return value & 0xFFFFFFFF, value >> 32


class FakeThread:
    def __init__(self, frames, pc=ELSEWHERE_PC, registers=None, sass=None, local=None, shared=None):
        self.frames = frames
        self.pc = pc
        self.registers = dict(registers or {})
        self.registers["pc"] = pc
        self.sass = sass          # its own disassembly (else the standard loop, or straight code)
        self.local = local or {}  # its local memory: address -> u64
        self.shared = shared or {}  # its block's shared memory: address -> u64


def waiting(frames, counter_address, observed, target):
    """A thread in the SIMPLE wait loop on the counter at `counter_address`."""
    regs = {}
    for low, value in ((2, counter_address - 8), (4, observed), (6, target)):
        regs[f"R{low}"], regs[f"R{low + 1}"] = _split(value)
    return FakeThread(frames, LOOP_PC, regs)


class FakeKernel:
    def __init__(self, kernel, name, blocks):
        self.kernel = kernel
        self.name = name
        self.blocks = blocks  # {block: {thread: FakeThread}}


class FakeCudaGdb:
    def __init__(self, kernels, device_memory=None):
        self.kernels = kernels
        self._device = ProcessMemory(device_memory) if device_memory is not None else None
        self._focus = None

    def kernels_text(self):
        rows = ["  Kernel Parent Dev Grid Status   SMs Mask   GridDim  BlockDim Invocation"]
        for k in self.kernels:
            rows.append(f"       {k.kernel}      -   0   {k.kernel + 7} Active 0x0000000f ({len(k.blocks)},1,1) "
                        f"(640,1,1) {k.name}(ncclDevKernelArgsStorage<4096ul>)")
        return "\n".join(rows) + "\n"

    def focus(self, kernel, block, thread):
        k = next((k for k in self.kernels if k.kernel == kernel), None)
        if k is None or block not in k.blocks or thread not in k.blocks[block]:
            raise DebuggerCommandError(f"no block ({block},0,0) thread ({thread},0,0) in kernel {kernel}")
        self._focus = k.blocks[block][thread]

    def frames(self):
        return list(self._focus.frames)

    def register(self, name):
        if name not in self._focus.registers:
            raise DebuggerCommandError(f"${name}: no such register")
        return self._focus.registers[name]

    def instructions(self, start, count):
        if self._focus.sass is not None:
            return self._focus.sass
        return SPIN_LOOP if self._focus.pc == LOOP_PC else STRAIGHT_CODE

    def local_u64(self, address):
        if address not in self._focus.local:
            raise DebuggerCommandError(f"local memory at {address:#x}: not in this fake")
        return self._focus.local[address]

    def shared_u64(self, address):
        if address not in self._focus.shared:
            raise DebuggerCommandError(f"shared memory at {address:#x}: not in this fake")
        return self._focus.shared[address]

    def host_focus(self):
        self._focus = None
        self.host_focused = True

    def device_u64(self, address):
        if self._device is None:
            raise MemoryReadError("no device memory in this fake")
        return self._device.u64(address)
