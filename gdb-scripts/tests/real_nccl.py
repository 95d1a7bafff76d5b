"""The installed libnccl.so.2's DWARF as gdb reads it, for the tests: the offsets that
NcclHostLayout derives (layout_dump.py inside gdb) and gdb's own `ptype /o` of each struct,
parsed independently (ptype_offsets). One gdb run per test process."""
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hangwatch_gdb.ptype_offsets import parse_ptype_offsets  # noqa: E402


def installed_nccl():
    if os.environ.get("HANGWATCH_NCCL_LIB"):
        return os.environ["HANGWATCH_NCCL_LIB"]
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    m = re.search(r"libnccl\.so\.2 \([^)]*x86-64[^)]*\) => (\S+)", out) or re.search(r"libnccl\.so\.2 .*=> (\S+)", out)
    if m:
        return m.group(1)
    for candidate in sorted(Path("/usr/local").glob("cuda*/lib*/libnccl.so.2")):
        return str(candidate)
    return None


class RealNccl:
    def __init__(self, lib, text):
        self.lib = lib
        self.text = text
        m = re.search(r"LAYOUT-BEGIN\n(.*?)\nLAYOUT-END", text, re.S)
        if not m:
            raise AssertionError(f"gdb printed no layout:\n{text[-3000:]}")
        self.layout_json = json.loads(m.group(1))
        self.ptype_text = dict(re.findall(r"PTYPE-BEGIN (\w+)\n(.*?)\nPTYPE-END \1", text, re.S))
        self.ptype = {name: parse_ptype_offsets(body) for name, body in self.ptype_text.items()}
        self.ptype_sizes = {name: int(re.findall(r"total size \(bytes\):\s*(\d+)", body)[-1])
                            for name, body in self.ptype_text.items()}


@functools.lru_cache(maxsize=1)
def real_nccl():
    """RealNccl, or None when this machine has no libnccl.so.2 or no gdb."""
    lib = installed_nccl()
    if not lib or not Path(lib).exists() or not shutil.which("gdb"):
        return None
    script = Path(__file__).resolve().parent / "layout_dump.py"
    run = subprocess.run(["gdb", "-nx", "-batch", lib, "-x", str(script)], capture_output=True, text=True,
                         timeout=300)
    return RealNccl(lib, run.stdout + run.stderr)
