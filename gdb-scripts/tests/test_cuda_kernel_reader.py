"""The kernel reader's rules on a fake cuda-gdb (no debugger, no NCCL needed): it reads a
block only where NCCL's thread roles are known (ring SIMPLE, one peer each way) and says
for everything else what was there and why it was not read."""
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_cuda_gdb import FakeCudaGdb, FakeKernel, FakeThread, waiting  # noqa: E402
from test_parsers import SPILLED_WAIT, TARGET_IN_A_REUSED_REGISTER  # noqa: E402
from hangwatch_gdb.cuda_ring_reader import (CudaKernelReader, kernel_kind, pat_simple_rule, pat_threads,  # noqa: E402
                                            ring_simple_rule, sendrecv_threads, tree_simple_rule, tree_splits,
                                            tree_threads)

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


class TreeRule(unittest.TestCase):
    def test_only_the_tree_allreduce_over_simple_is_read(self):
        self.assertIsNone(tree_simple_rule("AllReduce", "TREE", "SIMPLE"))
        self.assertIn("flags", tree_simple_rule("AllReduce", "TREE", "LL128"))
        self.assertIn("PAT", tree_simple_rule("AllGather", "PAT", "SIMPLE"))

    def test_the_split_of_runtreesplit_for_each_thread_count_a_work_may_run_with(self):
        # all_reduce.h, SIMPLE: nthreads/2, + 64 from 256 on; the work's nthreads is the block's
        # (NCCL 2.28), or in older NCCLs a halving of it while a multiple of 128.
        self.assertEqual(tree_splits(640), [384, 160])
        self.assertEqual(tree_splits(512), [320, 128, 64, 32])
        self.assertEqual(tree_threads(384), [0, 1, 2, 3, 384, 385, 386, 387])
        self.assertEqual(tree_threads(None), [0, 1, 2, 3])


class PatRule(unittest.TestCase):
    def test_only_pat_allgather_and_reducescatter_over_simple_are_read(self):
        self.assertIsNone(pat_simple_rule("AllGather", "PAT", "SIMPLE"))
        self.assertIsNone(pat_simple_rule("ReduceScatter", "PAT", "SIMPLE"))
        self.assertIn("only AllGather and ReduceScatter", pat_simple_rule("AllReduce", "PAT", "SIMPLE"))
        self.assertIn("PAT LL", pat_simple_rule("AllGather", "PAT", "LL"))
        self.assertIn("RING", pat_simple_rule("AllGather", "RING", "SIMPLE"))

    def test_each_worker_warps_threads_0_and_2_may_be_a_groups_waiter(self):
        # groupSize = 512 / (32 * parallelFactor) * 32: a group starts at a multiple of 32 for
        # every factor NCCL may pick; its tidInGroup 0 waits on a recv, 2 on a send.
        threads = pat_threads()
        self.assertEqual(threads[:4], [0, 2, 32, 34])
        self.assertEqual(len(threads), 32)
        self.assertTrue(all(t < 512 for t in threads))
        for factor in (1, 2, 4, 8, 16):
            group_size = 512 // (32 * factor) * 32
            for group in range(512 // group_size):
                self.assertIn(group * group_size, threads)
                self.assertIn(group * group_size + 2, threads)

    def test_a_pat_block_reads_the_waiting_groups_and_says_what_it_probed_when_none_waits(self):
        pat = ["ncclDevFunc_ReduceScatter_Sum_f32_PAT_SIMPLE"]
        waits = {t: FakeThread(pat) for t in range(0, 600)}
        waits[128] = waiting(pat, COUNTER, observed=4, target=6)
        waits[386] = waiting(pat, COUNTER + 64, observed=9, target=10)
        waits[1] = waiting(pat, COUNTER + 128, observed=1, target=2)  # a group's post thread: never a waiter
        reader, views = read(FakeKernel(0, "ncclDevKernel_ReduceScatter_Sum_f32_PAT_SIMPLE", {0: waits}),
                             FakeKernel(1, "ncclDevKernel_AllGather_PAT_SIMPLE", {0: {0: FakeThread(pat)}}))
        self.assertEqual([(v["thread"], v["side"], v["observed"], v["target"], v["algorithm"]) for v in views],
                         [(128, None, 4, 6, "PAT"), (386, None, 9, 10, "PAT")])
        self.assertEqual(reader.not_read, [])
        self.assertEqual(len(reader.not_waiting), 1)
        self.assertIn("kernel 1", reader.not_waiting[0])
        self.assertIn("PAT block, no worker thread found in a counter wait loop", reader.not_waiting[0])

    def test_a_pat_allreduce_is_said_not_read(self):
        pat = ["ncclDevFunc_AllReduce_Sum_f32_PAT_SIMPLE"]
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_f32_PAT_SIMPLE", pat,
                                       thread0=waiting(pat, COUNTER, 1, 2)))
        self.assertEqual(views, [])
        self.assertIn("only AllGather and ReduceScatter run PAT", reader.not_read[0])


class SendRecv(unittest.TestCase):
    def test_every_warps_first_thread_is_probed_and_the_views_side_is_left_to_the_address(self):
        self.assertEqual(sendrecv_threads(640), list(range(0, 640, 32)))
        frames = ["ncclDevFunc_SendRecv", "ncclDevKernel_SendRecv"]
        block = {t: FakeThread(frames) for t in range(640)}
        block[96] = waiting(frames, COUNTER, observed=3, target=5)
        block[97] = waiting(frames, COUNTER + 64, observed=1, target=2)  # not a primitive's thread 0: never probed
        reader, views = read(FakeKernel(0, "ncclDevKernel_SendRecv", {0: block}),
                             FakeKernel(1, "ncclDevKernel_SendRecv", {0: {0: FakeThread(frames)}}))
        self.assertEqual([(v["thread"], v["side"], v["collective"], v["algorithm"], v["counter_address"])
                          for v in views], [(96, None, "SendRecv", "RING", COUNTER)])
        self.assertEqual(reader.not_read, [])
        self.assertIn("SendRecv block, no warp's first thread found in a counter wait loop", reader.not_waiting[0])


class KernelReader(unittest.TestCase):
    def test_tree_blocks_probe_each_split_once_then_only_the_one_that_held_a_wait(self):
        tree = ["ncclDevFunc_AllReduce_Sum_f32_TREE_SIMPLE"]
        # The work ran with 320 of the block's 640 threads: its broadcast-down group starts at 160.
        blocks = {b: {t: FakeThread(tree) for t in (0, 1, 2, 3, 160, 161, 384, 385)} for b in (0, 1)}
        blocks[0][160] = waiting(tree, COUNTER, observed=7, target=9)
        blocks[1][0] = waiting(tree, COUNTER + 64, observed=3, target=4)
        blocks[1][161] = waiting(tree, COUNTER + 128, observed=5, target=6)
        blocks[1][384] = waiting(tree, COUNTER + 192, observed=1, target=2)  # not this work's: never probed
        reader, views = read(FakeKernel(0, "ncclDevKernel_AllReduce_Sum_f32_TREE_LL", blocks))
        self.assertEqual([(v["block"], v["thread"], v["side"], v["counter_address"]) for v in views],
                         [(0, 160, None, COUNTER), (1, 0, None, COUNTER + 64), (1, 161, None, COUNTER + 128)])
        self.assertEqual(reader._tree_split, {0: 160})
        self.assertEqual(reader.kernels[0]["read"], 2)
        self.assertEqual(reader.not_read, [])

    def test_a_tree_block_with_no_thread_in_a_wait_says_what_it_probed(self):
        tree = ["ncclDevFunc_AllReduce_Sum_f32_TREE_SIMPLE"]
        reader, views = read(FakeKernel(0, "ncclDevKernel_AllReduce_Sum_f32_TREE_LL", {0: {0: FakeThread(tree)}}))
        self.assertEqual(views, [])
        self.assertIn("TREE block, no thread found in a counter wait loop", reader.not_waiting[0])


    def test_a_send_wait_the_compiler_spilled_reads_its_counter_and_address_from_local_memory(self):
        # Parked at the compare of SPILLED_WAIT: R8:R9 hold the abort flag's, the counter and its
        # address are in local memory; the compare is head + R11 (NCCL_STEPS) against step + 1.
        frames = ["ncclDevFunc_AllReduce_Sum_f32_RING_SIMPLE"]
        text, pcs = SPILLED_WAIT
        regs = {"R1": 0x400, "R8": 0xdead, "R9": 0, "R10": 0x20, "R12": 0x1, "R11": 8, "R16": 0x77, "R17": 0}
        send = FakeThread(frames, pcs[2], regs, sass=text, local={0x408: 0x100000017, 0x450: COUNTER})
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_f32_RING_LL", frames, thread1=send))
        self.assertEqual([(v["side"], v["observed"], v["target"], v["counter_address"]) for v in views],
                         [("send", 0x100000017, 0x100000020 - 8, COUNTER)])

    def test_a_wait_whose_address_is_reloaded_from_shared_memory_reads_it_there_and_the_counter_in_memory(self):
        # PAT's shape after the compare: the step is in R49 and R12, the counter's registers
        # hold other things, its address was loaded from shared memory at R5 + 0x28.
        class Device:
            def read_memory(self, address, size):
                if address != COUNTER:
                    raise OSError("unmapped")
                return (0x200000009).to_bytes(8, "little")

        frames = ["ncclDevFunc_AllReduce_Sum_f32_RING_SIMPLE"]
        text, pcs = TARGET_IN_A_REUSED_REGISTER
        recv = FakeThread(frames, pcs[5], {"R49": 0xb, "R12": 0x2, "R13": 0, "R5": 0x300, "R14": 1, "R15": 0},
                          sass=text, shared={0x328: COUNTER})
        reader = CudaKernelReader(FakeCudaGdb([one_block("ncclDevKernel_AllReduce_Sum_f32_RING_LL", frames,
                                                         thread0=recv)], Device()))
        views = reader.read()
        self.assertEqual([(v["observed"], v["target"], v["counter_address"]) for v in views],
                         [(0x200000009, 0x20000000b, COUNTER)])

    def test_a_wait_whose_step_is_mid_update_at_the_pc_is_said_not_read(self):
        frames = ["ncclDevFunc_AllReduce_Sum_f32_RING_SIMPLE"]
        text, pcs = TARGET_IN_A_REUSED_REGISTER
        recv = FakeThread(frames, pcs[3], {"R12": 5, "R13": 0, "R49": 7, "R14": 0x10, "R15": 0}, sass=text)
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_f32_RING_LL", frames, thread0=recv))
        self.assertEqual(views, [])
        self.assertIn("the step it needs is mid-update in R12", reader.not_read[0])

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

    def test_an_unsymbolized_backtrace_is_not_taken_for_the_kernels_specialization(self):
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ["??"],
                                       thread0=waiting(["??"], COUNTER, 1, 2)))
        self.assertEqual(views, [])
        self.assertTrue(any("no ncclDevFunc_ frame" in n for n in reader.not_read), reader.not_read)

    def test_tree_ll_and_ring_ll_blocks_are_said_not_read(self):
        tree = ["ncclDevFunc_AllReduce_Sum_f32_TREE_LL"]
        ll = ["ncclDevFunc_AllGather_RING_LL"]
        reader, views = read(one_block("ncclDevKernel_AllReduce_Sum_f32_TREE_LL", tree,
                                       thread0=waiting(tree, COUNTER, 1, 2)),
                             FakeKernel(1, "ncclDevKernel_AllGather_RING_LL", {0: {0: FakeThread(ll)}}))
        self.assertEqual(views, [])
        self.assertEqual(len(reader.not_read), 2)
        self.assertIn("TREE LL: progress is in flags", reader.not_read[0])
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
