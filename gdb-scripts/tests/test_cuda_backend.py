"""The cuda backend against memory laid out as the installed libnccl.so.2's DWARF says
(synthetic_nccl.py builds it from gdb's `ptype /o`; the walker reads with the offsets
NcclHostLayout derives), and against a fake cuda-gdb for the kernel side. Skips where
there is no libnccl.so.2 or no gdb. What a real GPU would add (cuda-gdb's own commands,
real SASS) is not tested here."""
import copy
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import synthetic_nccl as syn  # noqa: E402
from fake_cuda_gdb import FakeCudaGdb, FakeKernel, FakeThread, waiting  # noqa: E402
from hangwatch_gdb.cuda_backend import CudaBackend  # noqa: E402
from hangwatch_gdb.cuda_ring_reader import CudaKernelReader  # noqa: E402
from hangwatch_gdb.nccl_host_layout import NIC_FIELDS, NIC_GLOBALS, NIC_SIZES, NcclHostLayout  # noqa: E402
from hangwatch_gdb.nccl_host_reader import CommAddress, NcclHostReader  # noqa: E402
from hangwatch_gdb.process_memory import ProcessMemory  # noqa: E402
from real_nccl import real_nccl  # noqa: E402

WATCHDOG_HASH = "57a76bac89a0c4ad"
COMM_HASH = 0x2F6C1A0E9B7D4C31
NCCL_ID = "%016x" % COMM_HASH
ALLREDUCE_SIMPLE = ["ncclDevFunc_AllReduce_Sum_f32_RING_SIMPLE", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
ALLGATHER_PAT = ["ncclDevFunc_AllGather_RING_SIMPLE_PAT_SIMPLE", "ncclDevKernel_AllGather_PAT_SIMPLE"]
ALLREDUCE_TREE = ["ncclDevFunc_AllReduce_Sum_f32_TREE_SIMPLE", "ncclDevKernel_AllReduce_Sum_f32_TREE_LL"]
PROXY = ("base", "nsteps", "posted", "received", "transmitted", "done")
# NCCL's device tables in the synthetic process: IB merged devices by netDev (3: one port;
# 4: two ports NCCL merged), IB ports by index (ncclIbDevs[0] is a port no right read reaches),
# socket interfaces by netDev.
IB_MERGED = {3: ("mlx5_3", [5]), 4: ("mlx5_0+mlx5_1", [0, 1])}
IB_PORTS = {0: 2, 1: 2, 5: 1}
SOCKETS = {2: "eth0"}


def rank2_channels():
    """Rank 2 of 0->1->2->3->0 on two nodes ({0,1}, {2,3}): it receives from 1 over NET
    (host counters, the proxy's sub-args) and sends to 3 over P2P (counters in device
    memory). Every number differs, so a read from a wrong place cannot give the right one."""
    return [
        # The proxy has not started this op yet (Ready): its sub-args are stale, the device step is the base.
        # Channel 0's tree: parent 0, one child 3 (also its ring next: the send to 3 is one
        # connection); the tree's other connections are P2P with their counters in device memory.
        {"prev": 1, "next": 3, "up": 0, "down": [3],
         "tree": {("recv", 0): syn.Connection("P2P", observed=70, device_step=66),
                  ("send", 0): syn.Connection("P2P", observed=81, posted=84, device_step=80),
                  ("recv", 3): syn.Connection("P2P", observed=93, device_step=90)},
         "recv": syn.Connection("NET", observed=130, device_step=129, counters="host", op_count=34,
                                proxy={"base": 128, "nsteps": 64, "posted": 12, "received": 5, "transmitted": 2,
                                       "done": 1}, proxy_state=syn.PROXY_OP_READY),
         "send": syn.Connection("P2P", observed=136, posted=141, device_step=133)},
        {"prev": 1, "next": 3,
         "recv": syn.Connection("NET", observed=259, device_step=258, counters="host", op_count=34,
                                proxy={"base": 257, "nsteps": 48, "posted": 11, "received": 3, "transmitted": 2,
                                       "done": 1}),
         "send": syn.Connection("P2P", observed=264, posted=270, device_step=261)},
    ]


def net_channel(recv_dev, send_dev=None, **recv):
    """One channel of rank 2 whose recv from 1 is NET on netDev recv_dev, and whose send to 3
    is NET on send_dev (None: P2P)."""
    send = (syn.Connection("NET", observed=52, posted=60, counters="host", net_dev=send_dev) if send_dev is not None
            else syn.Connection("P2P", observed=52, posted=60, device_step=50))
    recv_conn = syn.Connection("NET", observed=41, counters="host", net_dev=recv_dev, **recv)
    return [{"prev": 1, "next": 3, "recv": recv_conn, "send": send}]


@unittest.skipIf(real_nccl() is None, "no libnccl.so.2 or no gdb on this machine")
class NcclHostWalkOnTheRealLayout(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        nccl = real_nccl()
        cls.ptype, cls.sizes = nccl.ptype, nccl.ptype_sizes
        cls.layout_json = nccl.layout_json

    def setUp(self):
        self.nccl = syn.SyntheticNccl(self.ptype, self.sizes)
        self.channels = rank2_channels()
        self.comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH, self.channels)
        # NCCL's tables where this process has them: the library's address, relocated.
        counts = {name: t["count"] for name, t in self.layout_json["globals"].items()}
        tables = dict(self.nccl.ib_devices(counts, IB_MERGED, IB_PORTS),
                      **self.nccl.socket_devices(counts["ncclNetSocketDevs"], SOCKETS))
        self.layout = NcclHostLayout.from_json(dict(
            self.layout_json, globals={k: {"address": a, "count": n} for k, (a, n) in tables.items()}))

    def nic_comms(self):
        """Communicators of rank 2 on NCCL's IB, on its sockets, and on a plugin's net."""
        return [CommAddress(syn.build_comm(self.nccl, 2, 4, COMM_HASH + i, net_channel(*devs), net=net), "frame")
                for i, (net, devs) in enumerate((("IB", (3, 4)), ("Socket", (2,)), ("AWS Libfabric", (6,))), 1)]

    def walk(self, device=True, layout=None, comms=None, p2p=False):
        reader = NcclHostReader(ProcessMemory(self.nccl.host), layout or self.layout,
                                comms or [CommAddress(self.comm, "watchdog", WATCHDOG_HASH, NCCL_ID)],
                                ProcessMemory(self.nccl.device) if device else None)
        reader.p2p = p2p
        records, errors = reader.read()
        return reader, records + reader.p2p_records, errors

    def test_gdb_reads_host_counters_and_the_proxy_and_says_device_memory_was_not_read(self):
        _, records, errors = self.walk(device=False)
        self.assertEqual(len(records), 2)
        r = records[0]
        self.assertEqual((r["comm"], r["nccl_comm"], r["source"]), (WATCHDOG_HASH, NCCL_ID, "nccl-host"))
        self.assertEqual((r["channel"], r["rank"], r["prev"], r["next"], r["comm_size"]), (0, 2, 1, 3, 4))
        self.assertIsNone(r["seq"])  # NCCL's memory does not say which of the watchdog's collectives this is
        self.assertEqual(r["op"], "")
        self.assertEqual(r["send"], {"peer": 3, "target_step": None, "observed_step": None, "waiting": False,
                                     "base_step": None, "posted_step": None, "transport": "P2P",
                                     "counter_memory": "device"})
        self.assertEqual(r["recv"]["transport"], "NET")
        self.assertEqual((r["recv"]["observed_step"], r["recv"]["base_step"], r["recv"]["counter_memory"]),
                         (130, None, "host"))
        self.assertNotIn("proxy", r["recv"])  # an op the proxy has not started says nothing yet
        self.assertNotIn("nccl_op_count", r)
        self.assertIsNone(r["recv"]["target_step"])
        n = records[1]
        self.assertEqual(n["recv"]["proxy"], self.channels[1]["recv"].proxy)
        self.assertEqual((n["recv"]["observed_step"], n["recv"]["base_step"]), (259, 257))
        self.assertEqual(n["nccl_op_count"], 17)
        self.assertTrue(any("device memory not read" in e for e in errors), errors)

    def test_cuda_gdb_reads_the_device_counters_and_the_device_copy_of_conn_step(self):
        _, records, errors = self.walk(device=True)
        self.assertEqual(errors, [])
        send = records[1]["send"]
        self.assertEqual((send["observed_step"], send["posted_step"], send["base_step"], send["counter_memory"]),
                         (264, 270, 261, "device"))
        # NET: the proxy's base wins over the device step (both are the op's start, the proxy's chunk-aligned).
        self.assertEqual(records[1]["recv"]["base_step"], 257)
        self.assertEqual(records[0]["recv"]["base_step"], 129)
        for r in records:  # the host copy of conn.step (999) is written at connect only
            for side in ("recv", "send"):
                self.assertNotIn(999, r[side].values())

    def test_a_freed_communicator_is_said_and_not_walked(self):
        freed = syn.build_comm(self.nccl, 3, 4, COMM_HASH + 1, rank2_channels(), magic=0)
        _, records, errors = self.walk(comms=[CommAddress(freed, "watchdog", "ab", "")])
        self.assertEqual(records, [])
        self.assertTrue(any("not a live communicator" in e for e in errors), errors)

    def test_a_commhash_that_is_not_the_watchdogs_nccl_id_keeps_ncclss_and_drops_the_watchdog_hash(self):
        _, records, errors = self.walk(comms=[CommAddress(self.comm, "watchdog", WATCHDOG_HASH, "0123456789abcdef")])
        self.assertEqual((records[0]["comm"], records[0]["nccl_comm"]), ("", NCCL_ID))
        self.assertTrue(any("the watchdog's table says 0123456789abcdef" in e for e in errors), errors)

    def test_a_ring_connector_not_connected_yet_is_null(self):
        channels = rank2_channels()
        channels[1]["recv"].connected = False
        comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH, channels)
        _, records, _ = self.walk(comms=[CommAddress(comm, "frame")])
        self.assertIsNone(records[1]["recv"])
        self.assertIsNotNone(records[0]["recv"])
        self.assertEqual(records[0]["comm"], "")  # found in a frame: the watchdog's hash is not known

    def test_every_offset_size_and_table_address_the_walk_uses_changes_what_it_reads(self):
        used = TrackingLayout.from_json(self.layout.to_json())
        # A pipeline's point-to-point connections too (connector 1: ncclConnector's and ncclConnInfo's sizes).
        p2p = {("recv", 1): syn.Connection("P2P", observed=20, device_step=18),
               ("send", 3): syn.Connection("P2P", observed=30, posted=38, device_step=29)}
        p2p_comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH + 13, [dict(rank2_channels()[1], p2p=p2p)])
        comms = [CommAddress(self.comm, "watchdog", WATCHDOG_HASH, NCCL_ID), CommAddress(p2p_comm, "frame")] + \
            self.nic_comms()
        _, expected, expected_errors = self.walk(layout=used, comms=comms, p2p=True)
        self.assertGreater(len(used.keys), 25)
        nic_keys = {f"{s}.{p}" for s, p in NIC_FIELDS} | set(NIC_SIZES) | {name for name, _ in NIC_GLOBALS}
        self.assertEqual(nic_keys - used.keys, set())
        for key in sorted(used.keys):
            wrong = copy.deepcopy(used)
            if key in wrong.offsets:
                offset, size = wrong.offsets[key]
                wrong.offsets[key] = (offset + 8, size)
            elif key in wrong.globals:
                address, count = wrong.globals[key]
                wrong.globals[key] = (address + 8, count)
            else:
                wrong.sizes[key] += 8
            _, records, errors = self.walk(layout=wrong, comms=comms, p2p=True)
            self.assertNotEqual((records, errors), (expected, expected_errors), f"a wrong {key} went unnoticed")

    def test_a_net_connection_on_ib_names_its_merged_device_and_the_port_of_a_single_port_device(self):
        _, records, errors = self.walk(comms=self.nic_comms()[:1])
        r = records[0]
        self.assertEqual(r["recv"]["nic"], {"index": 3, "device": "mlx5_3", "port": 1})
        self.assertEqual(r["send"]["nic"], {"index": 4, "device": "mlx5_0+mlx5_1", "port": None})  # merged: 2 ports
        self.assertEqual(errors, [])

    def test_a_net_connection_on_sockets_names_its_interface_and_no_port(self):
        _, records, errors = self.walk(comms=self.nic_comms()[1:2])
        r = records[0]
        self.assertEqual(r["recv"]["nic"], {"index": 2, "device": "eth0", "port": None})
        self.assertNotIn("nic", r["send"])  # P2P: inside the node
        self.assertEqual(r["send"]["transport"], "P2P")
        self.assertEqual(errors, [])

    def test_a_plugin_net_gives_the_nic_index_only_and_says_why(self):
        _, records, errors = self.walk(comms=self.nic_comms()[2:])
        self.assertEqual(records[0]["recv"]["nic"], {"index": 6, "device": None, "port": None})
        self.assertTrue(any("NIC by index only" in e and "'AWS Libfabric'" in e for e in errors), errors)

    def test_an_ib_device_whose_port_nccl_never_set_has_no_port(self):
        tables = self.nccl.ib_devices({"ncclIbMergedDevs": 8, "ncclIbDevs": 8}, {7: ("mlx5_7", [6])}, {})
        layout = NcclHostLayout.from_json(dict(self.layout.to_json(), globals={
            k: {"address": a, "count": n} for k, (a, n) in tables.items()}))
        comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH, net_channel(7), net="IB")
        _, records, _ = self.walk(layout=layout, comms=[CommAddress(comm, "frame")])
        self.assertEqual(records[0]["recv"]["nic"], {"index": 7, "device": "mlx5_7", "port": None})  # IB counts from 1

    def test_a_net_dev_outside_its_table_keeps_the_index_and_names_nothing(self):
        count = self.layout.global_count("ncclNetSocketDevs")
        comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH, net_channel(count), net="Socket")
        _, records, _ = self.walk(comms=[CommAddress(comm, "frame")])
        self.assertEqual(records[0]["recv"]["nic"], {"index": count, "device": None, "port": None})

    def test_a_connection_proxied_by_another_process_has_no_nic_and_is_said(self):
        comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH, net_channel(3, same_process=False), net="IB")
        _, records, errors = self.walk(comms=[CommAddress(comm, "frame")])
        self.assertNotIn("nic", records[0]["recv"])
        self.assertEqual(records[0]["recv"]["observed_step"], 41)
        self.assertTrue(any("1 NET connection(s) proxied by another process (PXN" in e for e in errors), errors)

    def test_net_connections_without_proxy_resources_yet_have_no_nic(self):
        _, records, errors = self.walk()  # rank2_channels: proxy connections without transportResources
        self.assertEqual(records[0]["recv"]["transport"], "NET")
        self.assertTrue(all("nic" not in r[side] for r in records for side in ("recv", "send")))
        self.assertEqual(errors, [])

    def test_a_library_without_nccls_device_tables_still_walks_and_reads_the_nic_by_index(self):
        lacking = self.layout.to_json()
        lacking["globals"] = {}
        lacking["nic_missing"] = ["no variable ncclIbMergedDevs", "no variable ncclIbDevs"]
        _, with_tables, _ = self.walk(comms=self.nic_comms()[:1])
        _, records, errors = self.walk(layout=NcclHostLayout.from_json(lacking), comms=self.nic_comms()[:1])
        self.assertEqual(records[0]["recv"]["nic"], {"index": 3, "device": None, "port": None})
        for side in ("recv", "send"):
            self.assertEqual({k: v for k, v in records[0][side].items() if k != "nic"},
                             {k: v for k, v in with_tables[0][side].items() if k != "nic"})
        self.assertTrue(any("NIC of NET connections read in part" in e and "ncclIbMergedDevs" in e for e in errors),
                        errors)

    def test_the_kernels_waits_join_the_connection_whose_counter_they_poll(self):
        recv0, send0, recv1 = (self.channels[0]["recv"], self.channels[0]["send"], self.channels[1]["recv"])
        kernel = FakeKernel(3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", {
            0: {0: waiting(ALLREDUCE_SIMPLE, recv0.observed_at, observed=130, target=132),
                1: waiting(ALLREDUCE_SIMPLE, send0.observed_at, observed=136, target=135)},
            1: {0: waiting(ALLREDUCE_SIMPLE, recv1.observed_at, observed=259, target=261),
                1: FakeThread(ALLREDUCE_SIMPLE)},  # not in a wait loop: said, not guessed
        })
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout,
                              [CommAddress(self.comm, "watchdog", WATCHDOG_HASH, NCCL_ID)],
                              ProcessMemory(self.nccl.device))
        backend = CudaBackend(host, CudaKernelReader(FakeCudaGdb([kernel], self.nccl.device)))
        records, errors = backend.read()
        r0, r1 = records
        self.assertEqual((r0["source"], r0["op"], r0["protocol"], r0["algorithm"]),
                         ("cuda-registers", "ncclAllReduce", "SIMPLE", "RING"))
        self.assertEqual((r0["recv"]["target_step"], r0["recv"]["observed_step"], r0["recv"]["waiting"]),
                         (132, 130, True))
        self.assertEqual((r0["send"]["target_step"], r0["send"]["observed_step"], r0["send"]["posted_step"]),
                         (135, 136, 141))
        self.assertEqual([w["direction"] for w in r0["waiting_threads"]], ["recv", "send"])
        self.assertEqual((r1["recv"]["target_step"], r1["recv"]["base_step"]), (261, 257))
        self.assertIsNone(r1["send"]["target_step"])
        self.assertFalse(r1["send"]["waiting"])
        self.assertIsNone(r1["seq"])
        self.assertEqual(errors, [])  # a thread past its wait is an answer, not a failure to read
        self.assertEqual(len(backend.summary()["threads_not_waiting"]), 1)
        self.assertEqual(backend.joined, 3)

    def test_a_tree_kernels_waits_join_the_tree_connections_and_the_record_is_on_the_trees_graph(self):
        # runTreeSplit on a 640-thread block with all of it (nthreads 640: split 384): thread 0
        # of the reduce-up group waits for data from child 3; thread 1 (the parent send) is past
        # its wait; thread 384 of the broadcast-down group waits for data from parent 0.
        tree = self.channels[0]["tree"]
        kernel = FakeKernel(5, "ncclDevKernel_AllReduce_Sum_f32_TREE_LL", {
            0: {0: waiting(ALLREDUCE_TREE, tree[("recv", 3)].observed_at, observed=93, target=95),
                1: FakeThread(ALLREDUCE_TREE),
                384: waiting(ALLREDUCE_TREE, tree[("recv", 0)].observed_at, observed=70, target=72)}})
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout,
                              [CommAddress(self.comm, "watchdog", WATCHDOG_HASH, NCCL_ID)],
                              ProcessMemory(self.nccl.device))
        kernels = CudaKernelReader(FakeCudaGdb([kernel], self.nccl.device))
        records, errors = CudaBackend(host, kernels).read()
        r0, r1 = records
        self.assertEqual((r0["algorithm"], r0["protocol"], r0["op"], r0["source"]),
                         ("TREE", "SIMPLE", "ncclAllReduce", "cuda-registers"))
        got = {(c["direction"], c["peer"], c["role"]): c for c in r0["connections"]}
        self.assertEqual(set(got), {("recv", 0, "tree-parent"), ("send", 0, "tree-parent"),
                                    ("recv", 3, "tree-child"), ("send", 3, "tree-child")})
        self.assertEqual((got[("recv", 3, "tree-child")]["target_step"], got[("recv", 3, "tree-child")]["waiting"],
                          got[("recv", 3, "tree-child")]["base_step"]), (95, True, 90))
        self.assertEqual((got[("recv", 0, "tree-parent")]["target_step"], got[("recv", 0, "tree-parent")]["observed_step"]),
                         (72, 70))
        sent_up = got[("send", 0, "tree-parent")]
        self.assertEqual((sent_up["waiting"], sent_up["observed_step"], sent_up["posted_step"], sent_up["base_step"]),
                         (False, 81, 84, 80))
        # The send to 3 is the ring's next as well: one connection, read once.
        self.assertEqual(got[("send", 3, "tree-child")]["posted_step"], r0["send"]["posted_step"])
        self.assertEqual([w["direction"] for w in r0["waiting_threads"]], ["recv", "recv"])
        self.assertNotIn("connections", r1)  # channel 1 has no tree and no thread read: nothing claimed
        for r in records:
            self.assertNotIn("_tree_connections", r)
        self.assertEqual(errors, [])
        self.assertEqual(kernels._tree_split, {5: 384})

    def pat_comm(self):
        """Rank 2 of 4 ranks, one per node, as ncclTransportPatConnect leaves it: connections to
        rank +- 1 and +- 2 (= 0) both ways; the ring's (recv from 1, send to 3) among them."""
        if getattr(self, "_pat", None):
            return self._pat
        extra = {("recv", 3): syn.Connection("NET", observed=310, counters="host", device_step=305),
                 ("recv", 0): syn.Connection("NET", observed=320, counters="host", device_step=318),
                 ("send", 1): syn.Connection("NET", observed=330, posted=336, counters="host", device_step=331),
                 ("send", 0): syn.Connection("NET", observed=340, posted=343, counters="host", device_step=339)}
        channel = {"prev": 1, "next": 3, "tree": extra,
                   "recv": syn.Connection("NET", observed=350, counters="host", device_step=349),
                   "send": syn.Connection("NET", observed=360, posted=362, counters="host", device_step=358)}
        self._pat = syn.build_comm(self.nccl, 2, 4, COMM_HASH + 9, [channel]), extra, channel
        return self._pat

    def read_pat(self, collective, blocks):
        comm, _, _ = self.pat_comm()
        frames = [f"ncclDevFunc_{collective}_PAT_SIMPLE", f"ncclDevKernel_{collective}_PAT_SIMPLE"]
        kernel = FakeKernel(6, f"ncclDevKernel_{collective}_PAT_SIMPLE",
                            {0: {t: make(frames) for t, make in blocks.items()}})
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(comm, "frame")],
                              ProcessMemory(self.nccl.device))
        kernels = CudaKernelReader(FakeCudaGdb([kernel], self.nccl.device))
        records, errors = CudaBackend(host, kernels).read()
        return records[0], errors, kernels

    def test_a_pat_kernels_waits_join_its_collectives_pat_connections(self):
        # AllGather over PAT (prims_simple.h PatMode): group 0's thread 0 waits for data from
        # rank 3 (2 + 1), group 1's (parallel factor 2: threads 256..511) thread 258 waits for
        # rank 0 (2 - 2) to free a slot; thread 2 is past its wait.
        _, extra, _ = self.pat_comm()
        record, errors, kernels = self.read_pat("AllGather", {
            0: lambda f: waiting(f, extra[("recv", 3)].observed_at, observed=310, target=313),
            2: FakeThread,
            258: lambda f: waiting(f, extra[("send", 0)].observed_at, observed=340, target=341)})
        self.assertEqual((record["algorithm"], record["protocol"], record["op"], record["source"]),
                         ("PAT", "SIMPLE", "ncclAllGather", "cuda-registers"))
        got = {(c["direction"], c["peer"]): c for c in record["connections"]}
        # AllGather receives from rank + 2^k and sends to rank - 2^k: not the ring's recv from 1.
        self.assertEqual(set(got), {("recv", 3), ("recv", 0), ("send", 1), ("send", 0)})
        self.assertEqual({c["role"] for c in record["connections"]}, {"pat"})
        self.assertEqual((got[("recv", 3)]["target_step"], got[("recv", 3)]["waiting"], got[("recv", 3)]["base_step"]),
                         (313, True, 305))
        self.assertEqual((got[("send", 0)]["target_step"], got[("send", 0)]["waiting"], got[("send", 0)]["posted_step"]),
                         (341, True, 343))
        self.assertEqual((got[("send", 1)]["waiting"], got[("send", 1)]["observed_step"]), (False, 330))
        self.assertEqual([(w["tid"], w["direction"]) for w in record["waiting_threads"]], [(0, "recv"), (258, "send")])
        self.assertNotIn("_pat_connections", record)
        self.assertEqual(errors, [])
        self.assertEqual(kernels.not_waiting, [])

    def test_a_reduce_scatter_over_pat_is_on_the_other_connections(self):
        _, _, channel = self.pat_comm()
        record, errors, _ = self.read_pat("ReduceScatter", {
            0: lambda f: waiting(f, channel["recv"].observed_at, observed=350, target=352)})
        got = {(c["direction"], c["peer"]) for c in record["connections"]}
        self.assertEqual(got, {("recv", 1), ("recv", 0), ("send", 3), ("send", 0)})
        self.assertEqual(record["op"], "ncclReduceScatter")
        self.assertEqual(errors, [])

    def test_a_sendrecv_kernels_waits_are_a_record_of_their_own_on_the_p2p_connections(self):
        # A pipeline stage (rank 2) sends to 3 over NET and receives from 1 over P2P, on
        # connector 1 (sendrecv.h's primitives). Its SendRecv block gives warps 0-1 to the send
        # (thread 0 waits on the head) and warps 2-3 to the receive (thread 64 on the tail).
        p2p = {("recv", 1): syn.Connection("P2P", observed=20, device_step=18),
               ("send", 3): syn.Connection("NET", observed=30, posted=38, counters="host", device_step=29),
               ("send", 0): syn.Connection("P2P", observed=5, posted=5, device_step=5)}
        channel = dict(rank2_channels()[1], p2p=p2p)
        comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH + 11, [channel])
        frames = ["ncclDevFunc_SendRecv", "ncclDevKernel_SendRecv"]
        block = {t: FakeThread(frames) for t in range(0, 128, 32)}
        block[0] = waiting(frames, p2p[("send", 3)].observed_at, observed=30, target=31)
        block[64] = waiting(frames, p2p[("recv", 1)].observed_at, observed=20, target=22)
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(comm, "frame")],
                              ProcessMemory(self.nccl.device))
        kernels = CudaKernelReader(FakeCudaGdb([FakeKernel(4, "ncclDevKernel_SendRecv", {0: block})], self.nccl.device))
        records, errors = CudaBackend(host, kernels).read()
        self.assertEqual(errors, [])
        ring, transfer = records
        self.assertEqual((ring["source"], ring["recv"]["waiting"]), ("nccl-host", False))  # connector 0: not waited on
        self.assertNotIn("connections", ring)
        self.assertEqual((transfer["op"], transfer["source"], transfer["algorithm"], transfer["channel"],
                          transfer["rank"], transfer["nccl_comm"], transfer["recv"], transfer["send"]),
                         ("ncclSendRecv", "cuda-registers", "RING", 0, 2, "%016x" % (COMM_HASH + 11), None, None))
        got = {(c["direction"], c["peer"]): c for c in transfer["connections"]}
        self.assertEqual(set(got), {("send", 3), ("recv", 1)})  # the send to 0 nobody waits on is left out
        self.assertEqual({c["role"] for c in transfer["connections"]}, {"p2p"})
        self.assertEqual((got[("recv", 1)]["target_step"], got[("recv", 1)]["observed_step"],
                          got[("recv", 1)]["base_step"], got[("recv", 1)]["waiting"]), (22, 20, 18, True))
        self.assertEqual((got[("send", 3)]["posted_step"], got[("send", 3)]["transport"]), (38, "NET"))
        self.assertNotIn("_p2p_connections", transfer)

    def test_p2p_connections_are_not_walked_where_no_kernel_runs_sendrecv(self):
        p2p = {("recv", 1): syn.Connection("P2P", observed=20, device_step=18)}
        comm = syn.build_comm(self.nccl, 2, 4, COMM_HASH + 12, [dict(rank2_channels()[1], p2p=p2p)])
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(comm, "frame")],
                              ProcessMemory(self.nccl.device))
        kernel = FakeKernel(3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", {0: {0: FakeThread(ALLREDUCE_SIMPLE)}})
        records, _ = CudaBackend(host, CudaKernelReader(FakeCudaGdb([kernel], self.nccl.device))).read()
        self.assertEqual(len(records), 1)
        self.assertNotIn(p2p[("recv", 1)].observed_at, host.counters)

    def test_a_ring_kernel_keeps_the_ring_and_lists_no_tree_connections(self):
        recv0 = self.channels[0]["recv"]
        kernel = FakeKernel(3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", {
            0: {0: waiting(ALLREDUCE_SIMPLE, recv0.observed_at, observed=130, target=132), 1: FakeThread(ALLREDUCE_SIMPLE)}})
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(self.comm, "frame")],
                              ProcessMemory(self.nccl.device))
        records, _ = CudaBackend(host, CudaKernelReader(FakeCudaGdb([kernel], self.nccl.device))).read()
        self.assertEqual(records[0]["algorithm"], "RING")
        self.assertNotIn("connections", records[0])
        self.assertNotIn("_tree_connections", records[0])
        self.assertNotIn("_pat_connections", records[0])

    def test_where_a_block_runs_ll_tails_no_simple_wait_confirms_are_not_used(self):
        # NCCL's specialized kernel runs its own work inline: no ncclDevFunc_ frame, the kernel's
        # name says RING LL. LL writes no tail, so the P2P receive tails (the tree's) and every
        # send's posted tail may be an older SIMPLE collective's; NET's receive tail is the proxy's.
        ll = ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
        kernel = FakeKernel(3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", {0: {0: FakeThread(ll), 1: FakeThread(ll)}})
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(self.comm, "frame")],
                              ProcessMemory(self.nccl.device))
        reader = CudaKernelReader(FakeCudaGdb([kernel], self.nccl.device))
        records, errors = CudaBackend(host, reader).read()
        self.assertTrue(any("RING LL: progress is in flags" in n for n in reader.not_read), reader.not_read)
        r0, r1 = records
        self.assertEqual((r0["recv"]["transport"], r0["recv"]["observed_step"]), ("NET", 130))
        self.assertIsNone(r0["send"]["posted_step"])
        self.assertEqual(r0["send"]["observed_step"], 136)  # the head: LL's receiver posts it
        self.assertIsNone(r1["send"]["posted_step"])
        # Channel 0's tree receives from 0 and 3 over P2P; three sends: the ring's two and the tree's to 0.
        said = "2 receive tail(s) not on NET (P2P, SHM) and 3 send tail(s)"
        self.assertTrue(any("1 block(s) run LL or LL128" in e and said in e for e in errors), errors)

    def test_a_channel_a_simple_wait_was_joined_on_keeps_its_tails_beside_an_ll_kernel(self):
        recv0 = self.channels[0]["recv"]
        simple = FakeKernel(3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", {
            0: {0: waiting(ALLREDUCE_SIMPLE, recv0.observed_at, observed=130, target=132),
                1: FakeThread(ALLREDUCE_SIMPLE)}})
        ll = ["ncclDevKernel_AllGather_RING_LL"]
        other = FakeKernel(4, "ncclDevKernel_AllGather_RING_LL", {0: {0: FakeThread(ll)}})
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(self.comm, "frame")],
                              ProcessMemory(self.nccl.device))
        records, errors = CudaBackend(host, CudaKernelReader(FakeCudaGdb([simple, other], self.nccl.device))).read()
        r0, r1 = records
        self.assertEqual(r0["send"]["posted_step"], 141)
        self.assertIsNone(r1["send"]["posted_step"])
        self.assertTrue(any("ncclDevKernel_AllGather_RING_LL" in e and "run LL or LL128" in e for e in errors), errors)

    def test_a_block_whose_backtrace_is_empty_is_not_taken_for_its_kernels_specialization(self):
        kernel = FakeKernel(3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", {0: {0: FakeThread([])}})
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(self.comm, "frame")],
                              ProcessMemory(self.nccl.device))
        reader = CudaKernelReader(FakeCudaGdb([kernel], self.nccl.device))
        records, _ = CudaBackend(host, reader).read()
        self.assertEqual(reader.flag_protocol_blocks, [])
        self.assertEqual(records[0]["send"]["posted_step"], 141)

    def test_a_wait_on_a_counter_no_communicator_has_is_said_not_recorded(self):
        kernel = FakeKernel(0, "ncclDevKernel_AllGather_RING_LL", {
            0: {0: waiting(["ncclDevFunc_AllGather_RING_SIMPLE"], 0x7ffe12345678, observed=5, target=7),
                1: FakeThread(["ncclDevFunc_AllGather_RING_SIMPLE"])}})
        host = NcclHostReader(ProcessMemory(self.nccl.host), self.layout, [CommAddress(self.comm, "frame")])
        records, errors = CudaBackend(host, CudaKernelReader(FakeCudaGdb([kernel]))).read()
        self.assertTrue(all(r["source"] == "nccl-host" for r in records))
        self.assertTrue(any("0x7ffe12345678" in e and "not tied to a communicator" in e for e in errors), errors)


class TrackingLayout(NcclHostLayout):
    """Records which offsets and sizes a walk used."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.keys = set()
        self.sizes = _TrackingDict(self.sizes, self.keys)

    def off(self, key):
        self.keys.add(key)
        return super().off(key)

    def size_of(self, key):
        self.keys.add(key)
        return super().size_of(key)

    def global_at(self, name):
        self.keys.add(name)
        return super().global_at(name)

    def __deepcopy__(self, memo):
        return NcclHostLayout(dict(self.offsets), dict(self.sizes), [], dict(self.globals))


class _TrackingDict(dict):
    def __init__(self, data, keys):
        super().__init__(data)
        self._keys = keys

    def __getitem__(self, key):
        self._keys.add(key)
        return super().__getitem__(key)


if __name__ == "__main__":
    unittest.main()
