"""The debugger-free parts of gdb-scripts: communicator hash, record semantics, and
the parsing the cuda-gdb reader relies on, on recorded/synthetic cuda-gdb text."""
import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hangwatch_gdb import comm_hash, cuda_kernels, ring_records, spin_loop  # noqa: E402

INFO_CUDA_KERNELS = """\
  Kernel Parent Dev Grid Status   SMs Mask   GridDim  BlockDim Invocation
*      0      -   0    7 Active 0x0000000f (4,1,1) (640,1,1) ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs4K)
       1      -   0    9 Active 0x00000010 (1,1,1) (128,1,1) my_gemm_kernel(float*, float*)
"""

# The shape of NCCL's SIMPLE waitPeer loop as cuda-gdb disassembles it (synthetic).
SPIN_LOOP = """\
   0x00007fffd3a5c180 <+384>:\tIADD3 R6, P0, R10, 0x1, RZ ;
   0x00007fffd3a5c190 <+400>:\tIADD3.X R7, RZ, R11, RZ, P0, !PT ;
   0x00007fffd3a5c1a0 <+416>:\tLD.E.64.STRONG.SYS R4, [R2.64+0x8] ;
   0x00007fffd3a5c1b0 <+432>:\tISETP.GE.U32.AND P0, PT, R4, R6, PT ;
=> 0x00007fffd3a5c1c0 <+448>:\tISETP.GE.U32.AND.EX P0, PT, R5, R7, PT, P0 ;
   0x00007fffd3a5c1d0 <+464>:\t@!P0 BRA 0x7fffd3a5c1a0 ;
   0x00007fffd3a5c1e0 <+480>:\tEXIT ;
"""




def sass(*lines, base=0x7fff20001000):
    """cuda-gdb `x/i` text of `lines`, 16 bytes apart from `base`; a branch target "@N" is
    the N-th line's address."""
    out = []
    for i, text in enumerate(lines):
        text = re.sub(r"@(\d+)", lambda m: f"{base + 16 * int(m[1]):#x}", text)
        out.append(f"   {base + 16 * i:#018x} <+{16 * i}>:\t{text} ;")
    return "\n".join(out), [base + 16 * i for i in range(len(lines))]


# The shapes of NCCL 2.28's waits in its sm_90 SASS (what cuobjdump shows of libnccl.so.2; the
# registers and offsets here are made up): the loop rotated, the compare first on the value
# the last iteration loaded, the send side comparing head + NCCL_STEPS with step + 1.
ROTATED_SEND_WAIT = sass(
    "IADD3 R20, P2, R30, 0x8, RZ",                     # 0: low(head + NCCL_STEPS)
    "YIELD",
    "ISETP.GE.U32.AND P1, PT, R20, R24, PT",           # 2: against low(step + StepPerSlice)
    "IMAD.X R20, RZ, RZ, R31, P2",                     # 3: high(head + NCCL_STEPS), same register
    "ISETP.GE.U32.AND.EX P1, PT, R20, R25, PT, P1",    # 4
    "@P1 BRA 0x7fff20009000",                          # 5: reached: out of the loop
    "@!P1 LDG.E.64.STRONG.SYS R30, desc[UR4][R40.64]",  # 6: head = *headPtr
    "ISETP.GE.AND P2, PT, R0, 0x270f, PT",             # 7: checkAbort's spin count
    "VIADD R0, R0, 0x1",
    "@!P1 BRA @0")                                     # 9
# The tree's: counter and address spilled to local memory ([R1+0x8], [R1+0x50]), the amount
# added in a register, and the register of the counter reused by the abort check.
SPILLED_WAIT = sass(
    "LDL.64 R16, [R1+0x8]",                            # 0: the counter, from its slot
    "IADD3 R9, P2, R16, R11, RZ",                      # 1: + (0 or NCCL_STEPS)
    "ISETP.GE.U32.AND P0, PT, R9, R10, PT",            # 2
    "IMAD.X R9, RZ, RZ, R17, P2",
    "ISETP.GE.U32.AND.EX P0, PT, R9, R12, PT, P0",     # 4
    "@P0 BRA 0x7fff20009000",
    "LDL.64 R16, [R1+0x50]",                           # 6: the address, from its slot
    "@!P0 LDG.E.64.STRONG.SYS R8, desc[UR4][R16.64]",  # 7
    "STL.64 [R1+0x8], R8",                             # 8
    "LDS.64 R8, [R24+0x60]",                           # 9: the abort flag's address, in R8
    "LD.E.STRONG.SYS R9, desc[UR4][R8.64]",
    "@!P0 BRA @0")                                     # 11
# PAT's recv wait: the step needed recomputed in the loop, its high half in the register that
# holds the counter's low half the rest of the time.
TARGET_IN_A_REUSED_REGISTER = sass(
    "LDS R14, [R10+0x10]",                             # 0
    "IADD3 R49, P2, R14, R51, RZ",                     # 1: low(step + stepOffset + 1)
    "SHF.R.S32.HI R15, RZ, 0x1f, R14",
    "ISETP.GE.U32.AND P0, PT, R12, R49, PT",           # 3: the tail it loaded, against it
    "IMAD.X R12, R15, 0x1, R48, P2",                   # 4: high(target), into R12
    "ISETP.GE.U32.AND.EX P0, PT, R13, R12, PT, P0",    # 5
    "@P0 BRA 0x7fff20009000",
    "LDS.64 R14, [R5+0x28]",                           # 7: tailPtr
    "@!P0 LDG.E.64.STRONG.SYS R12, desc[UR4][R14.64]",  # 8
    "@!P0 BRA @0")                                     # 9
# SendRecv's send wait: the head kept in local memory, its pointer copied into the pair the
# load then overwrites.
COPIED_ADDRESS = sass(
    "LDL.64 R44, [R1+0x10]",                           # 0
    "IADD3 R5, P2, R44, 0x8, RZ",
    "ISETP.GE.U32.AND P0, PT, R5, R40, PT",            # 2
    "IMAD.X R4, RZ, RZ, R45, P2",
    "ISETP.GE.U32.AND.EX P0, PT, R4, R41, PT, P0",
    "@P0 BRA 0x7fff20009000",
    "IMAD.MOV.U32 R4, RZ, RZ, R12",                    # 6: the pointer, from R12:R13
    "IMAD.MOV.U32 R5, RZ, RZ, R13",
    "LD.E.64.STRONG.SYS R4, desc[UR36][R4.64]",        # 8
    "STL.64 [R1+0x10], R4",
    "@!P0 BRA @0")
# A FIFO's two ends, both loaded, compared: no step is waited for.
TWO_COUNTERS = sass(
    "LD.E.64.STRONG.SYS R2, desc[UR4][R6.64]",
    "LD.E.64.STRONG.SYS R4, desc[UR4][R8.64]",
    "ISETP.GT.U32.AND P0, PT, R4, R2, PT",
    "ISETP.GT.U32.AND.EX P0, PT, R5, R3, PT, P0",
    "@P0 BRA @0")


class CommHashIsTheWatchdogs(unittest.TestCase):
    def test_fnv1a64_with_the_standard_basis_matches_the_published_test_vectors(self):
        standard_basis = 0xcbf29ce484222325
        self.assertEqual(comm_hash.fnv1a64(b"", standard_basis), standard_basis)
        self.assertEqual(comm_hash.fnv1a64(b"a", standard_basis), 0xaf63dc4c8601ec8c)

    def test_sim_unique_id_is_magic_then_name_zero_padded_to_128_bytes(self):
        raw = comm_hash.sim_unique_id("/simnccl-1-0-ab")
        self.assertEqual(len(raw), 128)
        self.assertTrue(raw.startswith(b"SIMNCCL1/simnccl-1-0-ab\0"))
        self.assertEqual(set(raw[23:]), {0})
        self.assertEqual(comm_hash.sim_unique_id("/" + "x" * 300)[-1], 0)

    def test_hash_is_sixteen_hex_digits_and_differs_by_name(self):
        a, b = comm_hash.sim_comm_hash("/simnccl-1-0-a"), comm_hash.sim_comm_hash("/simnccl-1-0-b")
        self.assertRegex(a, r"^[0-9a-f]{16}$")
        self.assertNotEqual(a, b)

    def test_nccl_comm_id_is_simnccls_communicator_id(self):
        # tests/unit/simnccl_api_test.cc pins the same value for simnccl::communicatorId.
        self.assertEqual(comm_hash.sim_nccl_comm_id("/simnccl-1-0-ab"), "1852e9190e780d2a")


class RingRecordSemantics(unittest.TestCase):
    def test_recv_target_is_one_past_what_was_consumed(self):
        c = ring_records.recv_connection(3, consumed=40, observed=40, waiting=True, base_step=36)
        self.assertEqual((c["target_step"], c["observed_step"], c["base_step"]), (41, 40, 36))
        self.assertEqual(ring_records.progress(c), 4)

    def test_send_target_is_the_head_that_frees_the_next_slot(self):
        c = ring_records.send_connection(1, posted=48, observed=40, waiting=True, base_step=36)
        self.assertEqual((c["target_step"], c["posted_step"]), (48 + 1 - ring_records.NCCL_STEPS, 48))
        self.assertEqual(ring_records.send_connection(1, posted=2, observed=0, waiting=False)["target_step"], 0)

    def test_progress_without_a_base_is_the_count_itself_as_the_verdict_reads_it(self):
        self.assertEqual(ring_records.progress(ring_records.recv_connection(0, 1, 1, False)), 1)
        self.assertEqual(ring_records.progress(ring_records.recv_connection(0, 5, 5, False, base_step=9)), 5)
        self.assertIsNone(ring_records.progress(None))
        self.assertIsNone(ring_records.progress(ring_records.seen_connection(-1, base_step=3)))

    def test_op_names_get_nccls_prefix_once(self):
        self.assertEqual(ring_records.op_name("AllReduce"), "ncclAllReduce")
        self.assertEqual(ring_records.op_name("ncclAllGather"), "ncclAllGather")

    def test_values_a_reader_could_not_see_are_none_not_stand_ins(self):
        r = ring_records.new_record("", "", None, 2, -1, 0, -1, None, "nccl-host", nccl_comm="2f6c1a0e9b7d4c31")
        self.assertEqual((r["seq"], r["rank"], r["prev"], r["next"], r["comm_rank"], r["comm_size"]),
                         (None, None, None, None, None, None))
        self.assertEqual(r["channel"], 2)
        c = ring_records.seen_connection(-1, observed_step=7)
        self.assertEqual((c["peer"], c["target_step"], c["observed_step"], c["base_step"]), (None, None, 7, None))
        self.assertEqual(ring_records.progress(c), 7)
        s = ring_records.RecordSet()
        s.get(("a", None, 1), lambda: ring_records.new_record("a", "", None, 1, 0, 2, 1, 1, "x"))
        s.get(("a", 3, None), lambda: ring_records.new_record("a", "", 3, None, 0, 2, 1, 1, "x"))
        self.assertEqual([(r["seq"], r["channel"]) for r in s.records()], [(None, 1), (3, None)])

    def test_records_of_one_channel_merge_and_sort(self):
        s = ring_records.RecordSet()
        make = lambda ch: (lambda: ring_records.new_record("c", "AllReduce", 5, ch, 0, 4, 3, 1, "sim-frame"))
        s.get(("c", 5, 1), make(1))["recv"] = {"x": 1}
        s.get(("c", 5, 0), make(0))
        s.get(("c", 5, 1), make(1))["send"] = {"y": 2}
        recs = s.records()
        self.assertEqual([r["channel"] for r in recs], [0, 1])
        self.assertEqual((recs[1]["recv"], recs[1]["send"]), ({"x": 1}, {"y": 2}))


class CudaKernelText(unittest.TestCase):
    def test_info_cuda_kernels_rows_are_parsed(self):
        kernels = cuda_kernels.parse_info_cuda_kernels(INFO_CUDA_KERNELS)
        self.assertEqual(len(kernels), 2)
        k = kernels[0]
        self.assertEqual((k["kernel"], k["device"], k["grid"], k["status"]), (0, 0, 7, "Active"))
        self.assertEqual((k["grid_dim"], k["block_dim"], k["sm_mask"]), ((4, 1, 1), (640, 1, 1), 0xF))
        self.assertTrue(k["current"])
        self.assertEqual(k["name"], "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
        self.assertEqual([n["name"] for n in cuda_kernels.nccl_kernels(kernels)],
                         ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"])

    def test_kernel_and_function_names_give_algorithm_and_protocol(self):
        k = cuda_kernels.parse_nccl_function("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs4K)")
        self.assertEqual((k["collective"], k["redop"], k["dtype"], k["algorithm"], k["protocol"]),
                         ("AllReduce", "Sum", "f32", "RING", "LL"))
        f = cuda_kernels.parse_nccl_function("ncclDevFunc_ReduceScatter_Sum_bf16_COLLNET_DIRECT_LL128")
        self.assertEqual((f["kind"], f["algorithm"], f["protocol"]), ("function", "COLLNET_DIRECT", "LL128"))
        g = cuda_kernels.parse_nccl_function("ncclDevKernel_Generic_4")
        self.assertEqual((g["algorithm"], g["protocol"]), (None, None))
        self.assertIsNone(cuda_kernels.parse_nccl_function("my_gemm_kernel"))

    def test_the_device_function_in_the_backtrace_overrides_the_kernel_name(self):
        frames = ["ncclPrimitives::waitPeer", "ncclDevFunc_AllReduce_Sum_f32_RING_SIMPLE()", None,
                  "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
        self.assertEqual(cuda_kernels.protocol_from_backtrace("ncclDevKernel_AllReduce_Sum_f32_RING_LL", frames),
                         ("RING", "SIMPLE"))
        self.assertEqual(cuda_kernels.protocol_from_backtrace("ncclDevKernel_AllReduce_Sum_f32_RING_LL", []),
                         ("RING", "LL"))

    def test_block_b_runs_the_bth_set_bit_of_the_channel_mask(self):
        self.assertEqual(cuda_kernels.blocks_to_channels(0b101100, 3), {0: 2, 1: 3, 2: 5})
        self.assertEqual(cuda_kernels.blocks_to_channels(0b1, 4), {0: 0})

    def test_simple_waits_on_thread_zero_recv_and_thread_one_send(self):
        self.assertEqual(cuda_kernels.waiting_threads("SIMPLE"), [(0, "recv"), (1, "send")])
        self.assertIn((0, "send"), cuda_kernels.waiting_threads("LL"))


class SpinLoopMatching(unittest.TestCase):
    def test_the_load_and_the_64_bit_compare_of_the_wait_loop_are_found(self):
        ins = spin_loop.parse_disassembly(SPIN_LOOP)
        self.assertEqual(len(ins), 7)
        loop = spin_loop.find_spin_loop(ins, 0x7fffd3a5c1c0)
        self.assertIsNotNone(loop)
        self.assertEqual(loop["observed_regs"], ["R4", "R5"])
        self.assertEqual((loop["address_reg"], loop["address_offset"]), ("R2", 8))
        self.assertEqual(loop["target_regs"], ["R6", "R7"])
        self.assertEqual((loop["load_pc"], loop["branch_pc"]), (0x7fffd3a5c1a0, 0x7fffd3a5c1d0))

    def test_a_pc_outside_any_loop_has_no_spin_loop(self):
        ins = spin_loop.parse_disassembly(SPIN_LOOP)
        self.assertIsNone(spin_loop.find_spin_loop(ins, 0x7fffd3a5c1e0))
        no_load = [i for i in ins if not i[1].startswith("LD")]
        self.assertIsNone(spin_loop.find_spin_loop(no_load, 0x7fffd3a5c1c0))

    def test_a_rotated_wait_is_found_with_what_the_send_side_adds_and_read_at_every_pc(self):
        text, pcs = ROTATED_SEND_WAIT
        ins = spin_loop.parse_disassembly(text)
        for pc in pcs[:10]:
            loop = spin_loop.find_spin_loop(ins, pc)
            self.assertEqual((loop["observed_regs"], loop["target_regs"], loop["added"], loop["address_reg"]),
                             (["R30", "R31"], ["R24", "R25"], 8, "R40"), hex(pc))
            self.assertEqual(loop["not_live"], {"observed": [], "target": [], "address": []}, hex(pc))
        self.assertEqual((loop["load_pc"], loop["compare_pc"]), (pcs[6], pcs[2]))

    def test_a_spilled_counter_and_address_are_found_in_their_local_slots(self):
        text, pcs = SPILLED_WAIT
        ins = spin_loop.parse_disassembly(text)
        loop = spin_loop.find_spin_loop(ins, pcs[2])
        self.assertEqual((loop["observed_regs"], loop["added"], loop["target_regs"]), (["R8", "R9"], "R11",
                                                                                       ["R10", "R12"]))
        self.assertEqual((loop["observed_slot"], loop["address_slot"], loop["address_reg"]), (8, 0x50, "R16"))
        # At the compare R8:R9 are the abort flag's address and value, R16 the counter.
        self.assertEqual(loop["not_live"], {"observed": ["R8", "R9"], "target": [], "address": ["R16", "R17"]})
        # Right after the load, both are in their registers.
        self.assertEqual(spin_loop.find_spin_loop(ins, pcs[8])["not_live"],
                         {"observed": [], "target": [], "address": []})

    def test_a_target_mid_update_at_the_pc_is_named_not_read_as_the_step(self):
        text, pcs = TARGET_IN_A_REUSED_REGISTER
        ins = spin_loop.parse_disassembly(text)
        at_compare = spin_loop.find_spin_loop(ins, pcs[3])
        self.assertEqual((at_compare["observed_regs"], at_compare["target_regs"]), (["R12", "R13"], ["R49", "R12"]))
        self.assertEqual(at_compare["not_live"]["target"], ["R12"])   # it holds the counter here
        after = spin_loop.find_spin_loop(ins, pcs[5])
        self.assertEqual(after["not_live"]["target"], [])
        self.assertEqual(after["not_live"]["observed"], ["R12"])      # and the target there
        self.assertEqual(after["not_live"]["address"], ["R14", "R15"])
        self.assertEqual(after["address_shared"], ("R5", 0x28))  # reloaded from shared memory each time

    def test_an_address_copied_into_the_loads_pair_is_read_from_where_it_was_copied(self):
        text, pcs = COPIED_ADDRESS
        loop = spin_loop.find_spin_loop(spin_loop.parse_disassembly(text), pcs[2])
        self.assertEqual((loop["address_reg"], loop["observed_slot"], loop["added"]), ("R12", 0x10, 8))
        self.assertEqual(loop["not_live"], {"observed": ["R5"], "target": [], "address": []})  # R5: head + 8

    def test_two_loaded_counters_compared_are_no_wait_for_a_step(self):
        text, pcs = TWO_COUNTERS
        found = spin_loop.find_spin_loop(spin_loop.parse_disassembly(text), pcs[2])
        self.assertIn("unmatched", found)

    def test_register_halves_combine_into_the_64_bit_counter(self):
        self.assertEqual(spin_loop.combine_u64(0x10, 0x2), 0x200000010)
        self.assertEqual(spin_loop.combine_u64(-1, 0), 0xFFFFFFFF)


if __name__ == "__main__":
    unittest.main()
