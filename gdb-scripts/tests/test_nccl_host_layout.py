"""NcclHostLayout against the installed libnccl.so.2: every offset it derives at run time
from the library's DWARF equals what gdb's `ptype /o` prints for the same library."""
import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_nccl import real_nccl  # noqa: E402


class NcclHostLayoutMatchesPtype(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        nccl = real_nccl()
        if nccl is None:
            raise unittest.SkipTest("no libnccl.so.2 or no gdb on this machine")
        cls.lib, cls.text, cls.layout, cls.ptype = nccl.lib, nccl.text, nccl.layout_json, nccl.ptype

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
