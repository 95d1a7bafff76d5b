# Run inside `gdb -nx -batch LIBRARY -x this` (tests/real_nccl.py): prints the offsets
# NcclHostLayout derives, then gdb's own `ptype /o` of each struct and `print &` of each
# NCCL table variable the NIC read uses.
import json
import os
import sys

import gdb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hangwatch_gdb import nccl_host_layout as L  # noqa: E402

gdb.execute("set max-value-size unlimited")
layout = L.NcclHostLayout.from_debugger()
print("LAYOUT-BEGIN")
print(json.dumps(layout.to_json()))
print("LAYOUT-END")
for name in sorted({s for s, _ in L.FIELDS + L.NIC_FIELDS} | set(L.SIZES + L.NIC_SIZES)):
    print(f"PTYPE-BEGIN {name}")
    try:
        print(gdb.execute(f"ptype /o struct {name}", to_string=True))
    except gdb.error:  # a typedef name (ncclNet_t)
        print(gdb.execute(f"ptype /o {name}", to_string=True))
    print(f"PTYPE-END {name}")
for name, _ in L.NIC_GLOBALS:
    print(f"GLOBAL-BEGIN {name}")
    print(gdb.execute(f"print &'{name}'", to_string=True).strip())
    print(f"GLOBAL-END {name}")
