#!/usr/bin/env python3
"""A debugger whose target is killed under it, as a launcher's kill-on-exit does: takes gdb's
"-p PID" arguments, SIGKILLs the target and fails as gdb then does, so tests can prove the
collector keeps the stacks it took and says the target died during the debugger phase."""
import os
import signal
import sys

pid = int(sys.argv[sys.argv.index("-p") + 1])
os.kill(pid, signal.SIGKILL)
print("Couldn't get registers: No such process.", flush=True)
sys.exit(1)
