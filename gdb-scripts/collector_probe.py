# Loaded by the collector's debugger phase (gdb/cuda-gdb -nx -batch -p PID -x this):
# proves the debugger attached and can see the threads. Ring progress (reading the
# simnccl/NCCL wait state) replaces this in the ring-progress issue.
import json

import gdb

inferior = gdb.selected_inferior()
report = {"pid": inferior.pid, "threads": len(inferior.threads()), "ring_progress": []}
print("HANGWATCH-DEBUGGER-BEGIN")
print(json.dumps(report))
print("HANGWATCH-DEBUGGER-END")
