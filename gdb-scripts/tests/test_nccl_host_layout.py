"""NcclHostLayout against the installed libnccl.so.2: every offset it derives at run time
from the library's DWARF equals what gdb's `ptype /o` prints for the same library."""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hangwatch_gdb.ptype_offsets import parse_ptype_offsets  # noqa: E402


def installed_nccl():
    if os.environ.get("HANGWATCH_NCCL_LIB"):
        return os.environ["HANGWATCH_NCCL_LIB"]
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"libnccl\.so\.2 \([^)]*x86-64[^)]*\) => (\S+)", out) or re.search(r"libnccl\.so\.2 .*=> (\S+)", out)
    return m.group(1) if m else None


class NcclHostLayoutMatchesPtype(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = installed_nccl()
        if not cls.lib or not Path(cls.lib).exists() or not shutil.which("gdb"):
            raise unittest.SkipTest("no libnccl.so.2 or no gdb on this machine")
        script = Path(__file__).resolve().parent / "layout_dump.py"
        run = subprocess.run(["gdb", "-nx", "-batch", cls.lib, "-x", str(script)], capture_output=True, text=True,
                             timeout=300)
        cls.text = run.stdout + run.stderr
        m = re.search(r"LAYOUT-BEGIN\n(.*?)\nLAYOUT-END", cls.text, re.S)
        if not m:
            raise AssertionError(f"gdb printed no layout:\n{cls.text[-3000:]}")
        cls.layout = json.loads(m.group(1))
        cls.ptype = {name: parse_ptype_offsets(body) for name, body in
                     re.findall(r"PTYPE-BEGIN (\w+)\n(.*?)\nPTYPE-END \1", cls.text, re.S)}

    def test_every_needed_field_is_found_in_the_library(self):
        self.assertEqual(self.layout["missing"], [])

    def test_derived_offsets_equal_ptype_offsets(self):
        self.assertGreater(len(self.layout["offsets"]), 20)
        for key, derived in self.layout["offsets"].items():
            struct, path = key.split(".", 1)
            self.assertIn(struct, self.ptype, f"no ptype /o output for {struct}")
            self.assertIn(path, self.ptype[struct], f"ptype /o of {struct} has no {path}")
            self.assertEqual((derived["offset"], derived["size"]), self.ptype[struct][path], key)

    def test_struct_sizes_equal_ptype_totals(self):
        for struct, size in self.layout["sizes"].items():
            body = self.text.split(f"PTYPE-BEGIN {struct}\n")[1].split(f"PTYPE-END {struct}")[0]
            totals = re.findall(r"total size \(bytes\):\s*(\d+)", body)
            self.assertEqual(size, int(totals[-1]), struct)

if __name__ == "__main__":
    unittest.main()
