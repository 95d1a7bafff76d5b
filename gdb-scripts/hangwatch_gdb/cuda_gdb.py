"""What the cuda backend asks of the debugger, in gdb/cuda-gdb commands: host memory of
the inferior, device memory and kernel focus under cuda-gdb. The readers stay plain Python
(nccl_host_reader, cuda_ring_reader); this is the only place that talks to gdb for them.
UNTESTED ON HARDWARE: cuda-gdb's commands are as its documentation gives them."""
import gdb

from .cuda_ring_reader import DebuggerCommandError
from .process_memory import MemoryReadError, ProcessMemory


def _run(command):
    try:
        return gdb.execute(command, to_string=True)
    except gdb.error as e:
        raise DebuggerCommandError(f"{command}: {e}") from e


def reads_device_memory():
    """cuda-gdb, whatever its Python exposes (cuda-gdb 11.8 has no gdb.cuda module): it has
    the `info cuda` commands, gdb has not."""
    try:
        gdb.execute("help info cuda", to_string=True)
        return True
    except gdb.error:
        return False


def host_memory(inferior):
    return ProcessMemory(inferior, (gdb.MemoryError, gdb.error))


class _GlobalMemory:
    """Device global memory through cuda-gdb's @global address space qualifier."""

    def read_memory(self, address, size):
        try:
            value = gdb.parse_and_eval(f"*(@global unsigned char (*)[{size}]) {address:#x}")
            return bytes(int(value[i]) & 0xFF for i in range(size))
        except gdb.error as e:
            raise MemoryReadError(str(e)) from e


def device_memory():
    return ProcessMemory(_GlobalMemory(), (gdb.error, gdb.MemoryError))


class CudaGdb:
    """The kernel reader's view of cuda-gdb."""

    def __init__(self):
        self._device = device_memory()
        self._host_thread = gdb.selected_thread()

    def kernels_text(self):
        return _run("info cuda kernels")

    def focus(self, kernel, block, thread):
        _run(f"cuda kernel {kernel} block ({block},0,0) thread ({thread},0,0)")

    def frames(self, limit=16):
        names, frame = [], gdb.newest_frame()
        while frame is not None and len(names) < limit:
            names.append(frame.name())
            frame = frame.older()
        return names

    def register(self, name):
        try:
            return int(gdb.parse_and_eval("$" + name))
        except gdb.error as e:
            raise DebuggerCommandError(f"${name}: {e}") from e

    def instructions(self, start, count):
        return _run(f"x/{count}i {start:#x}")

    def device_u64(self, address):
        return self._device.u64(address)

    def local_u64(self, address):
        """The focused thread's local memory (where the compiler spills), @local qualifier."""
        return self._space_u64("local", address)

    def shared_u64(self, address):
        """The focused block's shared memory, @shared qualifier."""
        return self._space_u64("shared", address)

    @staticmethod
    def _space_u64(space, address):
        try:
            return int(gdb.parse_and_eval(f"*(@{space} unsigned long long *) {address:#x}")) & 0xFFFFFFFFFFFFFFFF
        except gdb.error as e:
            raise DebuggerCommandError(f"{space} memory at {address:#x}: {e}") from e

    def host_focus(self):
        """Back on the host thread that was selected before any `cuda kernel` focus."""
        if self._host_thread is not None and self._host_thread.is_valid():
            self._host_thread.switch()
