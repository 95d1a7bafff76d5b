"""cuda backend, host side: NCCL's own structures of each communicator, walked in process
memory with offsets that NcclHostLayout derived from libnccl.so.2's DWARF.

ncclComm -> channels[c] (ring prev/next) -> peers[r] -> send/recv ncclConnector -> conn
(ncclConnInfo: the head/tail pointers the kernel polls). The host copy of conn.step is
written once at connect; the kernel keeps the live step in registers and writes it back to
the *device* copy (devPeersHostPtr[r]) when a collective's primitives end: that copy is
the hung collective's starting step, readable only where the debugger reads device memory
(cuda-gdb). Counters live in host memory for SHM and NET (readable by gdb too) and in
device memory for P2P. NET connections also have the proxy thread's ncclProxySubArgs
(ncclComm.proxyState -> progressState.active -> ncclProxyArgs.subs[]) and a NIC: the netDev
of their proxy connection's resources, named by the device table of the communicator's net.

Plain Python: memory comes in as ProcessMemory objects (gdb's inferior, cuda-gdb's device
reads, or a test's synthetic bytes)."""
import collections

from . import ring_records
from .nccl_host_layout import PROXY_OP_IN_PROGRESS
from .process_memory import MemoryReadError
from .ring_reader import RingReader

NCCL_MAGIC = 0x0280028002800280  # src/include/comm.h; commFree sets both magics to 0
MAX_CHANNELS = 64                 # MAXCHANNELS in NCCL 2.28
MAX_PROXY_OPS = 4096              # bound on the active list walk (a corrupt list must not loop)
MAX_NAME = 64                     # bound on a C string read through a pointer (a net's name)
TREE_KEY = "_tree_connections"    # a record's tree connections until the kernel says it runs the tree
PAT_KEY = "_pat_connections"      # its PAT connections by collective, until the kernel says it runs PAT
P2P_KEY = "_p2p_connections"      # a p2p record's connections, until a kernel thread is found waiting on one
P2P_CONNECTOR = 1                 # send[1]/recv[1]: sendrecv.h's primitives run with connIndex 1
NIC_INDEX_KEYS = ("ncclConnector.proxyConn.sameProcess", "ncclProxyConnection.transportResources",
                  "sendNetResources.netDev", "recvNetResources.netDev")


class CommAddress:
    """Where a communicator is, and who said so: the watchdog's comm table (with its hash
    and NCCL's id for it), or a `comm` variable in one of NCCL's frames."""

    def __init__(self, address, origin, watchdog_hash="", nccl_id=""):
        self.address = address
        self.origin = origin  # "watchdog" or "frame"
        self.watchdog_hash = watchdog_hash
        self.nccl_id = nccl_id


class NcclHostReader(RingReader):
    name = "nccl-host"
    fills = ("comm (from the watchdog's table)", "nccl_comm", "channel", "rank", "prev", "next", "comm_size",
             "recv/send peer", "observed_step (host counters; device counters under cuda-gdb)",
             "posted_step (send)", "base_step (NET proxy base; device conn.step under cuda-gdb)", "transport",
             "counter_memory", "proxy (NET)", "nccl_op_count (NET)", "nic (NET)")

    def __init__(self, memory, layout, comms, device_memory=None):
        super().__init__()
        self.memory = memory
        self.layout = layout
        self.comms = comms
        self.device = device_memory
        self.communicators_read = 0
        self.counters = {}  # counter address the kernel polls -> (record, side, connection); for the kernel join
        # Point-to-point connections (connector 1 to every peer) are read only where a kernel
        # runs SendRecv (the backend says so): one record per channel that has any, in p2p_records.
        self.p2p = False
        self.p2p_records = []
        self._proxy_subs = {}  # ncclProxyConnection address -> sub-args dict
        self._proxy_states_read = set()
        self._device_unread = 0
        self._net_connections = 0
        self._nic_elsewhere = 0  # NET connections whose proxy connection is another process's (PXN)
        self._nic_index_only = collections.Counter()  # net name (None: unread) -> NICs named by index only

    # Reads of one field of a struct at `base`: offsets come from the layout only.
    def _field(self, base, key):
        return self.memory.unsigned(base + self.layout.off(key), self.layout.size_of(key))

    def _signed(self, base, key):
        return self.memory.signed(base + self.layout.off(key), self.layout.size_of(key))

    def read(self):
        records = []
        seen = set()
        for comm in self.comms:
            if comm.address in seen:
                continue
            seen.add(comm.address)
            try:
                records.extend(self._comm(comm))
            except MemoryReadError as e:
                self.errors.append(f"ncclComm at {comm.address:#x} ({comm.origin}): {e}")
        if self._device_unread:
            self.errors.append(f"{self._device_unread} head/tail counter(s) not readable from the host: device "
                               "memory not read (the debugger cannot read it; cuda-gdb can), nor the device copies "
                               "of conn.step")
        self._nic_errors()
        return records, self.errors

    def summary(self):
        return {"communicators": self.communicators_read, "proxy_states": len(self._proxy_states_read),
                "proxy_ops": len(self._proxy_subs)}

    def _comm(self, entry):
        base = entry.address
        start, end = self._field(base, "ncclComm.startMagic"), self._field(base, "ncclComm.endMagic")
        if start != NCCL_MAGIC or end != NCCL_MAGIC:
            self.errors.append(f"ncclComm at {base:#x} ({entry.origin}): magic {start:#x}/{end:#x}, not NCCL's "
                               f"{NCCL_MAGIC:#x}: not a live communicator (freed, or not an ncclComm)")
            return []
        nccl_comm = "%016x" % self._field(base, "ncclComm.commHash")
        if entry.nccl_id and entry.nccl_id != nccl_comm:
            self.errors.append(f"ncclComm at {base:#x}: NCCL's commHash is {nccl_comm}, the watchdog's table "
                               f"says {entry.nccl_id}: the watchdog's hash is not used for it")
        watchdog_hash = entry.watchdog_hash if not entry.nccl_id or entry.nccl_id == nccl_comm else ""
        rank, nranks = self._signed(base, "ncclComm.rank"), self._signed(base, "ncclComm.nRanks")
        nchannels = self._signed(base, "ncclComm.nChannels")
        self.communicators_read += 1
        if nranks <= 1:
            return []  # a ring of one has no connections
        proxy_state = self._field(base, "ncclComm.proxyState")
        self._read_proxy(proxy_state)
        net = self._net_name(base)
        records = []
        for c in range(max(0, min(nchannels, MAX_CHANNELS))):
            channel = base + self.layout.off("ncclComm.channels") + c * self.layout.sizes["ncclChannel"]
            records.append(self._channel(channel, c, rank, nranks, nccl_comm, watchdog_hash, net))
        return records

    def _channel(self, channel, c, rank, nranks, nccl_comm, watchdog_hash, net):
        prev = self._signed(channel, "ncclChannel.ring.prev")
        next_ = self._signed(channel, "ncclChannel.ring.next")
        record = ring_records.new_record(watchdog_hash, "", None, c, rank, nranks, prev, next_, self.name,
                                         algorithm="RING", protocol="", nccl_comm=nccl_comm)
        peers = self._field(channel, "ncclChannel.peers")
        dev_peers = self._field(channel, "ncclChannel.devPeersHostPtr")
        seen = {}  # (side, peer) -> its connection: a ring neighbour may be a tree neighbour too

        def connection(side, peer):
            if (side, peer) not in seen:
                try:
                    seen[(side, peer)] = self._connection(record, side, peer, peers, dev_peers, net)
                except MemoryReadError as e:
                    seen[(side, peer)] = None
                    self.errors.append(f"comm {nccl_comm} channel {c} {side} (peer {peer}): {e}")
            return seen[(side, peer)]

        for side, peer in (("recv", prev), ("send", next_)):
            if 0 <= peer < nranks and peers:
                record[side] = connection(side, peer)
        # The tree's connections (src/transport/generic.cc connects them on connector 0, as the
        # ring's): the parent and each child, data both ways (reduce up, broadcast down). Kept
        # aside: they become the record's `connections` only where the kernel runs the tree.
        tree = []
        for role, peer in [("tree-parent", self._signed(channel, "ncclChannel.tree.up"))] + \
                [("tree-child", d) for d in self._tree_down(channel)]:
            if not (0 <= peer < nranks) or not peers:
                continue
            for side in ("recv", "send"):
                conn = connection(side, peer)
                if conn is not None:
                    tree.append((side, role, conn))
        record[TREE_KEY] = tree
        record[PAT_KEY] = self._pat(rank, nranks, connection) if peers else {}
        if self.p2p and peers:
            self._p2p_channel(record, peers, dev_peers, net)
        return record

    def _p2p_channel(self, ring_record, peers, dev_peers, net):
        """The channel's connected point-to-point connections, in a record of their own (a
        transfer is not the ring's progress): NCCL connects them on connector 1 when a send or
        receive with that peer first runs (src/group.cc, ncclTransportP2pSetup(comm, NULL, 1))."""
        r = ring_record
        record = ring_records.new_record(r["comm"], "", None, r["channel"], r["rank"], r["comm_size"], None, None,
                                         self.name, algorithm="RING", protocol="", nccl_comm=r["nccl_comm"])
        found = []
        for peer in range(r["comm_size"] or 0):
            for side in ("recv", "send"):
                try:
                    conn = self._connection(record, side, peer, peers, dev_peers, net, P2P_CONNECTOR)
                except MemoryReadError as e:
                    self.errors.append(f"comm {r['nccl_comm']} channel {r['channel']} p2p {side} (peer {peer}): {e}")
                    continue
                if conn is not None:
                    found.append((side, conn))
        if found:
            record[P2P_KEY] = found
            self.p2p_records.append(record)

    @staticmethod
    def _pat(rank, nranks, connection):
        """PAT's connections per collective: src/transport/generic.cc ncclTransportPatConnect
        connects rank +- 2^k both ways on connector 0; prims_simple.h's PatMode uses, at each
        2^k, AllGather's recv from rank + 2^k and send to rank - 2^k, ReduceScatter's the
        other way round. A peer at two distances (2^k = nranks / 2) is one connection."""
        out = {}
        for collective, recv_sign in (("ncclAllGather", 1), ("ncclReduceScatter", -1)):
            pat, seen = [], set()
            mask = 1
            while mask < nranks:
                for side, sign in (("recv", recv_sign), ("send", -recv_sign)):
                    peer = (rank + sign * mask) % nranks
                    conn = connection(side, peer)
                    if conn is not None and (side, peer) not in seen:
                        seen.add((side, peer))
                        pat.append((side, conn))
                mask <<= 1
            out[collective] = pat
        return out

    def _tree_down(self, channel):
        at = channel + self.layout.off("ncclChannel.tree.down")
        count = self.layout.size_of("ncclChannel.tree.down") // 4  # int down[NCCL_MAX_TREE_ARITY]
        return [self.memory.signed(at + 4 * i, 4) for i in range(count)]

    def _connection(self, record, side, peer, peers, dev_peers, net, index=0):
        L = self.layout
        peer_at = self.memory.pointer(peers + 8 * peer)
        # Rings, trees and PAT use connector 0 of send[]/recv[]; point-to-point uses 1.
        connector = peer_at + L.off(f"ncclChannelPeer.{side}") + index * L.sizes["ncclConnector"]
        if not self._field(connector, "ncclConnector.connected"):
            return None  # NCCL connects rings when first used (NCCL_RUNTIME_CONNECT)
        conn = connector + L.off("ncclConnector.conn")
        tail_at, head_at = self._field(conn, "ncclConnInfo.tail"), self._field(conn, "ncclConnInfo.head")
        transport = self._transport(self._field(connector, "ncclConnector.transportComm"), side)
        # recv waits on its tail (what the peer delivered); send waits on its head (what the peer consumed)
        # and has written its own tail at the peer (what it posted).
        observed_at = tail_at if side == "recv" else head_at
        observed, where = self._counter(observed_at, transport)
        c = ring_records.seen_connection(peer, observed_step=observed)
        if side == "send":
            c["posted_step"], _ = self._counter(tail_at, transport)
        c["transport"] = transport
        c["counter_memory"] = where
        nic = self._nic(connector, side, net) if transport == "NET" else None
        if nic is not None:
            c["nic"] = nic
        proxy = self._proxy_subs.get(self._field(connector, "ncclConnector.proxyConn.connection"))
        if proxy is not None:
            c["proxy"] = {k: proxy[k] for k in ("base", "nsteps", "posted", "received", "transmitted", "done")}
            c["base_step"] = proxy["base"]
            record["nccl_op_count"] = proxy["op_count"]
        else:
            c["base_step"] = self._device_step(dev_peers, peer, side, index)
        if observed_at:
            self.counters[observed_at] = (record, side, c)
        return c

    def _transport(self, transport_comm, side):
        """NCCL's name of the transport ("P2P", "SHM", "NET", "COLLNET", ...): the connector's
        transportComm points at the send or recv member of a struct ncclTransport."""
        if not transport_comm:
            return ""
        L = self.layout
        try:
            name = self.memory.cstring(transport_comm - L.off(f"ncclTransport.{side}") + L.off("ncclTransport.name"),
                                       L.size_of("ncclTransport.name"))
        except MemoryReadError:
            return ""
        return name if name and name.replace("_", "").isalnum() and name.isupper() else ""

    def _counter(self, address, transport):
        """(value, "host"|"device"|"") of a head/tail counter; value None when unreadable."""
        if not address:
            return None, ""
        try:
            return self.memory.u64(address), "host"
        except MemoryReadError:
            pass
        if self.device is not None:
            try:
                return self.device.u64(address), "device"
            except MemoryReadError:
                return None, ""
        self._device_unread += 1
        return None, "device" if transport == "P2P" else ""

    def _device_step(self, dev_peers, peer, side, index=0):
        """conn.step of the device copy: where the previous collective left this connection."""
        if self.device is None or not dev_peers or peer is None:
            return None
        L = self.layout
        try:
            dev_peer = self.memory.pointer(dev_peers + 8 * peer)  # a host array of device pointers
            at = dev_peer + L.off(f"ncclDevChannelPeer.{side}") + index * L.sizes["ncclConnInfo"] + \
                L.off("ncclConnInfo.step")
            return self.device.u64(at)
        except MemoryReadError as e:
            self.errors.append(f"device conn.step of peer {peer} {side}: {e}")
            return None

    def _read_proxy(self, proxy_state):
        """The proxy thread's active operations, by the ncclProxyConnection they move."""
        if not proxy_state or proxy_state in self._proxy_states_read:
            return
        self._proxy_states_read.add(proxy_state)
        L = self.layout
        try:
            args = self._field(proxy_state, "ncclProxyState.progressState.active")
        except MemoryReadError as e:
            self.errors.append(f"proxy state at {proxy_state:#x}: {e}")
            return
        walked = set()
        while args and args not in walked and len(walked) < MAX_PROXY_OPS:
            walked.add(args)
            try:
                if self._signed(args, "ncclProxyArgs.state") == PROXY_OP_IN_PROGRESS:
                    op_count = self._field(args, "ncclProxyArgs.opCount")
                    nsubs = self._signed(args, "ncclProxyArgs.nsubs")
                    for i in range(max(0, min(nsubs, MAX_CHANNELS))):
                        self._proxy_sub(args + L.off("ncclProxyArgs.subs") + i * L.sizes["ncclProxySubArgs"], op_count)
                args = self._field(args, "ncclProxyArgs.next")
            except MemoryReadError as e:
                self.errors.append(f"proxy op at {args:#x}: {e}")
                return

    def _proxy_sub(self, sub, op_count):
        f = lambda name: self._field(sub, f"ncclProxySubArgs.{name}")  # noqa: E731
        connection = f("connection")
        self._proxy_subs[connection] = {
            "base": f("base"), "nsteps": self._signed(sub, "ncclProxySubArgs.nsteps"), "posted": f("posted"),
            "received": f("received"), "transmitted": f("transmitted"), "done": f("done"),
            # Collectives' opCount is (index << 1) | 0; p2p ones are odd and count per channel.
            "op_count": op_count >> 1 if op_count % 2 == 0 else None}

    def _net_name(self, comm):
        """The communicator's net as NCCL names it (ncclComm.ncclNet->name: "IB", "Socket", a
        plugin's); None where it cannot be read."""
        if not self.layout.has("ncclComm.ncclNet", "ncclNet_t.name"):
            return None
        try:
            net = self._field(comm, "ncclComm.ncclNet")
            return _plain_name(self._c_string(self._field(net, "ncclNet_t.name"))) if net else None
        except MemoryReadError:
            return None

    def _c_string(self, address):
        """A NUL-terminated string of unknown size, up to MAX_NAME: read in 16-byte pieces,
        byte by byte where a piece would run past the end of the mapping."""
        raw = b""
        while len(raw) < MAX_NAME and b"\0" not in raw:
            try:
                raw += self.memory.read(address + len(raw), 16)
            except MemoryReadError:
                raw += self.memory.read(address + len(raw), 1)
        return raw.split(b"\0", 1)[0].decode("ascii", errors="replace") if b"\0" in raw else ""

    def _nic(self, connector, side, net):
        """{"index", "device", "port"} of a NET connection's NIC: netDev of its proxy
        connection's send/recvNetResources, named by its net's device table (NET_DEVICE_TABLES;
        another net: index only). None while NCCL's state does not say (no proxy connection or
        resources), or holds it in another process (PXN: proxyConn.sameProcess 0)."""
        self._net_connections += 1
        if not self.layout.has(*NIC_INDEX_KEYS):
            return None
        try:
            connection = self._field(connector, "ncclConnector.proxyConn.connection")
            if not connection:
                return None
            if self._signed(connector, "ncclConnector.proxyConn.sameProcess") != 1:
                self._nic_elsewhere += 1
                return None
            resources = self._field(connection, "ncclProxyConnection.transportResources")
            if not resources:
                return None
            net_dev = self._signed(resources, f"{side}NetResources.netDev")
        except MemoryReadError as e:
            self.errors.append(f"NIC of a NET {side} connection: {e}")
            return None
        device_table = NET_DEVICE_TABLES.get(net)
        if device_table is None:
            self._nic_index_only[net] += 1
            return {"index": net_dev, "device": None, "port": None}
        device, port = device_table(self, net_dev)
        return {"index": net_dev, "device": device, "port": port}

    def _table_entry(self, table, struct_name, index):
        """The address of NCCL's static table[index]; None outside the table or without it."""
        if not self.layout.has(table, struct_name) or not 0 <= index < self.layout.global_count(table):
            return None
        return self.layout.global_at(table) + index * self.layout.sizes[struct_name]

    def _device_name(self, address, key):
        try:
            return _plain_name(self.memory.cstring(address + self.layout.off(key), self.layout.size_of(key)))
        except MemoryReadError:
            return None

    def _ib_device(self, net_dev):
        """IB's merged device net_dev: ncclIbMergedDevs[net_dev].devName ("mlx5_0", or
        "mlx5_0+mlx5_1" where NCCL merged ports) and, for a device of one port,
        ncclIbDevs[vProps.devs[0]].portNum (IB ports count from 1)."""
        L = self.layout
        merged = self._table_entry("ncclIbMergedDevs", "ncclIbMergedDev", net_dev)
        if merged is None or not L.has("ncclIbMergedDev.devName"):
            return None, None
        name = self._device_name(merged, "ncclIbMergedDev.devName")
        port_keys = ("ncclIbMergedDev.vProps", "ncclNetVDeviceProps_t.ndevs", "ncclNetVDeviceProps_t.devs",
                     "ncclIbDev.portNum")
        if name is None or not L.has(*port_keys):
            return name, None
        props = merged + L.off("ncclIbMergedDev.vProps")
        try:
            if self._signed(props, "ncclNetVDeviceProps_t.ndevs") != 1:
                return name, None
            devs = props + L.off("ncclNetVDeviceProps_t.devs")
            dev = self.memory.signed(devs, L.size_of("ncclNetVDeviceProps_t.ndevs"))  # int devs[], as int ndevs
            at = self._table_entry("ncclIbDevs", "ncclIbDev", dev)
            port = self._field(at, "ncclIbDev.portNum") if at is not None else 0
        except MemoryReadError:
            return name, None
        return name, port or None

    def _socket_device(self, net_dev):
        """Socket's interface net_dev: ncclNetSocketDevs[net_dev].devName ("eth0"); no port."""
        at = self._table_entry("ncclNetSocketDevs", "ncclNetSocketDev", net_dev)
        if at is None or not self.layout.has("ncclNetSocketDev.devName"):
            return None, None
        return self._device_name(at, "ncclNetSocketDev.devName"), None

    def _nic_errors(self):
        if not self._net_connections:
            return
        if self.layout.nic_missing:
            self.errors.append("NIC of NET connections read in part or not at all: "
                               + "; ".join(self.layout.nic_missing))
        if self._nic_elsewhere:
            self.errors.append(f"{self._nic_elsewhere} NET connection(s) proxied by another process (PXN, "
                               "proxyConn.sameProcess 0): their NIC is in that process's memory, not read")
        for net, n in sorted(self._nic_index_only.items(), key=lambda kv: str(kv[0])):
            why = f"its net is '{net}', not NCCL's IB or Socket" if net else "its net's name could not be read"
            self.errors.append(f"{n} NET connection(s): NIC by index only ({why}; the device table is not known)")


# How each of NCCL's own nets keeps its devices, by ncclNet_t.name: (reader, netDev) -> (device, port).
NET_DEVICE_TABLES = {"IB": NcclHostReader._ib_device, "Socket": NcclHostReader._socket_device}


def _plain_name(name):
    """A name as NCCL wrote it (printable ASCII), else None: never a guess from other bytes."""
    return name if name and name.isascii() and name.isprintable() else None
