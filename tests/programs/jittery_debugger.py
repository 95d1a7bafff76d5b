#!/usr/bin/env python3
"""gdb after a random pause of up to $JITTERY_DEBUGGER_MAX_S seconds (default 8): collectors
then finish at different times, as cuda-gdb attaches on real GPU nodes do, so the first rank
to finish is well ahead of the last. Takes and passes on gdb's arguments unchanged."""
import os
import random
import sys
import time

time.sleep(random.uniform(0, float(os.environ.get("JITTERY_DEBUGGER_MAX_S", "8"))))
os.execvp("gdb", ["gdb", *sys.argv[1:]])
