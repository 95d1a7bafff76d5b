"""The kernel reader's rules on a fake cuda-gdb (no debugger, no NCCL needed): it reads a
block only where NCCL's thread roles are known (ring SIMPLE, one peer each way) and says
for everything else what was there and why it was not read."""
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_cuda_gdb import FakeCudaGdb, FakeKernel, FakeThread, waiting  # noqa: E402
from hangwatch_gdb.cuda_ring_reader import CudaKernelReader, kernel_kind, ring_simple_rule  # noqa: E402

COUNTER = 0x7ffe00001000


def read(*kernels):
    reader = CudaKernelReader(FakeCudaGdb(list(kernels)))
    views = reader.read()
    return reader, views


def one_block(name, frames, thread0=None, thread1=None):
    return FakeKernel(0, name, {0: {0: thread0 or FakeThread(frames), 1: thread1 or FakeThread(frames)}})


class RingSimpleRule(unittest.TestCase):
    def test_only_ring_simple_with_one_peer_each_way_is_read(self):
        self.assertIsNone(ring_simple_rule("AllReduce", "RING", "SIMPLE"))
        self.assertIsNone(ring_simple_rule("ReduceScatter", "RING", "SIMPLE"))
        self.assertIn("TREE", ring_simple_rule("AllReduce", "TREE", "SIMPLE"))
        self.assertIn("flags inside the receive buffer", ring_simple_rule("AllReduce", "RING", "LL128"))
        self.assertIn("SendRecv", ring_simple_rule("SendRecv", "RING", "SIMPLE"))
        self.assertIn("unknown", ring_simple_rule("AllReduce", None, None))

    def test_kernel_kinds(self):
        self.assertEqual(kernel_kind("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), "collective")
        self.assertEqual(kernel_kind("ncclSymkDevKernel_AllReduce_RSxLDMC_AGxSTMC_sum_f32"), "symmetric")
        self.assertIsNone(kernel_kind("my_gemm_kernel"))


class KernelReader(unittest.TestCase):
    def test_a_ring_ll_kernel_running_the_simple_function_is_read(self):
        frames = ["ncclDevFunc_AllReduce_Sum_bf16_RING_SIMPLE", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"]
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", frames,
                                       thread0=waiting(frames, COUNTER, observed=40, target=42),
                                       thread1=waiting(frames, COUNTER + 64, observed=33, target=35)))
        self.assertEqual([(v["side"], v["observed"], v["target"], v["counter_address"]) for v in views],
                         [("recv", 40, 42, COUNTER), ("send", 33, 35, COUNTER + 64)])
        self.assertEqual((views[0]["collective"], views[0]["protocol"], views[0]["block"]), ("AllReduce", "SIMPLE", 0))
        self.assertEqual(reader.kernels[0]["read"], 1)
        self.assertTrue(reader.cuda.host_focused)  # the host walk that follows reads with a host thread in focus

    def test_the_kernel_name_alone_does_not_decide_the_protocol(self):
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ["??"],
                                       thread0=waiting(["??"], COUNTER, 1, 2)))
        self.assertEqual(views, [])
        self.assertTrue(any("no ncclDevFunc_ frame" in n for n in reader.not_read), reader.not_read)

    def test_tree_and_ll_blocks_are_said_not_read(self):
        tree = ["ncclDevFunc_AllReduce_Sum_f32_TREE_SIMPLE"]
        ll = ["ncclDevFunc_AllGather_RING_LL"]
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_f32_TREE_LL", tree,
                                       thread0=waiting(tree, COUNTER, 1, 2)),
                             FakeKernel(1, "ncclDevKernel_AllGather_RING_LL", {0: {0: FakeThread(ll)}}))
        self.assertEqual(views, [])
        self.assertEqual(len(reader.not_read), 2)
        self.assertIn("TREE algorithm", reader.not_read[0])
        self.assertIn("RING LL", reader.not_read[1])

    def test_symmetric_kernels_are_named_and_not_read(self):
        reader, views = read(FakeKernel(2, "ncclSymkDevKernel_AllReduce_RSxLDMC_AGxSTMC_sum_bf16",
                                        {0: {0: FakeThread([])}}))
        self.assertEqual(views, [])
        self.assertEqual(reader.kernels[0]["kind"], "symmetric")
        self.assertIn("ncclSymkDevKernel_AllReduce_RSxLDMC_AGxSTMC_sum_bf16", reader.not_read[0])
        self.assertIn("symmetric-memory kernel", reader.not_read[0])

    def test_a_thread_past_its_wait_is_not_waiting_and_a_missing_thread_is_not_read(self):
        frames = ["ncclDevFunc_Broadcast_RING_SIMPLE"]
        kernel = FakeKernel(0, "ncclDevKernel_Broadcast_RING_LL", {0: {0: FakeThread(frames)}})
        reader, views = read(kernel)
        self.assertEqual(views, [])
        self.assertEqual(len(reader.not_waiting), 1)
        self.assertIn("thread 0 (recv): not in a counter wait loop", reader.not_waiting[0])
        self.assertEqual(len(reader.not_read), 1)
        self.assertIn("thread 1 (send): no block (0,0,0) thread (1,0,0)", reader.not_read[0])

    def test_other_kernels_are_not_nccls(self):
        reader, views = read(FakeKernel(0, "my_gemm_kernel", {0: {0: FakeThread([])}}))
        self.assertEqual((views, reader.kernels, reader.not_read), ([], [], []))


if __name__ == "__main__":
    unittest.main()
