#!/usr/bin/env python3
"""A debugger that attaches and then hangs: takes gdb's "-p PID" arguments,
PTRACE_ATTACHes (which sends the target SIGSTOP) and sleeps forever, so tests can
prove the collector's debugger time bound kills it and leaves the target running."""
import ctypes
import sys
import time

PTRACE_ATTACH = 16

pid = int(sys.argv[sys.argv.index("-p") + 1])
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
    print(f"stuck_debugger: attach failed, errno {ctypes.get_errno()}", flush=True)
print("stuck_debugger: attached, hanging", flush=True)
while True:
    time.sleep(3600)
