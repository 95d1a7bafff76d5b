# Run inside `gdb -nx -batch LIBRARY -x this` (tests/real_nccl.py): prints the offsets
# NcclHostLayout derives, then gdb's own `ptype /o` of each struct.
import json
import os
import sys

import gdb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hangwatch_gdb import nccl_host_layout  # noqa: E402

gdb.execute("set max-value-size unlimited")
layout = nccl_host_layout.NcclHostLayout.from_debugger()
print("LAYOUT-BEGIN")
print(json.dumps(layout.to_json()))
print("LAYOUT-END")
for name in sorted({s for s, _ in nccl_host_layout.FIELDS} | set(nccl_host_layout.SIZES)):
    print(f"PTYPE-BEGIN {name}")
    print(gdb.execute(f"ptype /o struct {name}", to_string=True))
    print(f"PTYPE-END {name}")
