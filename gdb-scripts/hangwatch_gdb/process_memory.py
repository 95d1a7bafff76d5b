"""Typed reads of another process's memory through any object with
`read_memory(address, size) -> bytes-like` (a gdb.Inferior, cuda-gdb's device reads, or a
test's synthetic memory). A failed read is a MemoryReadError, whatever the source."""
import struct


class MemoryReadError(Exception):
    pass


_FORMATS = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


class ProcessMemory:
    def __init__(self, source, read_errors=()):
        self._source = source
        # The exception types the source raises for an unreadable address (gdb.MemoryError, ...).
        self._read_errors = tuple(read_errors) or (Exception,)

    def read(self, address, size):
        if not address:
            raise MemoryReadError(f"null pointer ({size} bytes)")
        try:
            raw = bytes(self._source.read_memory(address, size))
        except MemoryReadError:
            raise
        except self._read_errors as e:
            raise MemoryReadError(f"cannot read {size} bytes at {address:#x}: {e}") from e
        if len(raw) != size:
            raise MemoryReadError(f"short read at {address:#x}: {len(raw)} of {size} bytes")
        return raw

    def unsigned(self, address, size):
        return struct.unpack(_FORMATS[size], self.read(address, size))[0]

    def signed(self, address, size):
        return struct.unpack(_FORMATS[size].lower(), self.read(address, size))[0]

    def u64(self, address):
        return self.unsigned(address, 8)

    def pointer(self, address):
        return self.unsigned(address, 8)

    def cstring(self, address, size):
        raw = self.read(address, size)
        return raw.split(b"\0", 1)[0].decode("ascii", errors="replace")
