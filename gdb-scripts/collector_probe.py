# Loaded by the collector's debugger phase (gdb/cuda-gdb -nx -batch -p PID -x this).
# Prints one JSON object between the HANGWATCH-DEBUGGER-BEGIN/END lines: the process's
# ring progress records and what the readers could not read (gdb-scripts/README.md).
import json
import os
import sys
import time

import gdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hangwatch_gdb import probe  # noqa: E402

start = time.monotonic()
report = probe.run(gdb.selected_inferior())
report["seconds"] = round(time.monotonic() - start, 3)
sys.stdout.flush()
print("HANGWATCH-DEBUGGER-BEGIN")
print(json.dumps(report))
print("HANGWATCH-DEBUGGER-END")
sys.stdout.flush()
