#!/usr/bin/env python3
"""A live process for the cuda backend's end-to-end test without a GPU: it loads the real
libnccl.so.2 (so the debugger finds NCCL's DWARF in it, and the collector picks the cuda
backend from its mappings), maps host memory at a fixed address filled with a synthetic
ncclComm laid out with that library's offsets, prints "nccl_memory_target pid=P ready"
and waits for stdin to close. Usage: nccl_memory_target.py LIBNCCL BASE_HEX SPAN_FILE"""
import ctypes
import os
import sys

PROT_READ_WRITE = 0x3
MAP_PRIVATE_ANONYMOUS = 0x22
MAP_FIXED_NOREPLACE = 0x100000
PAGE = 4096


def main():
    lib, base, span_file = sys.argv[1], int(sys.argv[2], 16), sys.argv[3]
    ctypes.CDLL(lib)
    data = open(span_file, "rb").read()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    size = (len(data) + PAGE - 1) // PAGE * PAGE
    at = libc.mmap(base, size, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)
    if at != base:
        print(f"nccl_memory_target: cannot map {size} bytes at {base:#x}: errno {ctypes.get_errno()}", flush=True)
        return 1
    ctypes.memmove(at, data, len(data))
    print(f"nccl_memory_target pid={os.getpid()} ready", flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
