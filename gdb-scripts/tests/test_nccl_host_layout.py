"""NcclHostLayout against the installed libnccl.so.2: every offset it derives at run time
from the library's DWARF equals what gdb's `ptype /o` prints for the same library, and every
NCCL table it locates is where gdb's `print &` puts it."""
import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hangwatch_gdb.nccl_host_layout import NIC_FIELDS, NIC_GLOBALS, NcclHostLayout  # noqa: E402
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

    def test_every_field_and_table_of_a_net_connections_nic_is_found_in_the_library(self):
        self.assertEqual(self.layout["nic_missing"], [])
        for struct, path in NIC_FIELDS:
            self.assertIn(f"{struct}.{path}", self.layout["offsets"])
        self.assertEqual(set(self.layout["globals"]), {name for name, _ in NIC_GLOBALS})

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

    def test_nccls_device_tables_are_where_gdb_prints_them_with_their_declared_length(self):
        for name, element in NIC_GLOBALS:
            body = self.text.split(f"GLOBAL-BEGIN {name}\n")[1].split(f"GLOBAL-END {name}")[0]
            m = re.search(r"\(struct (\w+) \(\*\)\[(\d+)\]\) (0x[0-9a-f]+) <" + name + ">", body)
            self.assertIsNotNone(m, body)
            self.assertEqual(m[1], element)
            self.assertEqual((self.layout["globals"][name]["address"], self.layout["globals"][name]["count"]),
                             (int(m[3], 16), int(m[2])), name)

    def test_the_layout_round_trips_through_json(self):
        self.assertEqual(NcclHostLayout.from_json(self.layout).to_json(), self.layout)


if __name__ == "__main__":
    unittest.main()
