"""cuda backend, host side: NCCL's own structures of each communicator, walked in process
memory with offsets that NcclHostLayout derived from libnccl.so.2's DWARF.

ncclComm -> channels[c] (ring prev/next) -> peers[r] -> send/recv ncclConnector -> conn
(ncclConnInfo: the head/tail pointers the kernel polls). The host copy of conn.step is
written once at connect; the kernel keeps the live step in registers and writes it back to
the *device* copy (devPeersHostPtr[r]) when a collective's primitives end: that copy is
the hung collective's starting step, readable only where the debugger reads device memory
(cuda-gdb). Counters live in host memory for SHM and NET (readable by gdb too) and in
device memory for P2P. NET connections also have the proxy thread's ncclProxySubArgs
(ncclComm.proxyState -> progressState.active -> ncclProxyArgs.subs[]).

Plain Python: memory comes in as ProcessMemory objects (gdb's inferior, cuda-gdb's device
reads, or a test's synthetic bytes)."""
from . import ring_records
from .nccl_host_layout import PROXY_OP_IN_PROGRESS
from .process_memory import MemoryReadError
from .ring_reader import RingReader

NCCL_MAGIC = 0x0280028002800280  # src/include/comm.h; commFree sets both magics to 0
MAX_CHANNELS = 64                 # MAXCHANNELS in NCCL 2.28
MAX_PROXY_OPS = 4096              # bound on the active list walk (a corrupt list must not loop)


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
             "counter_memory", "proxy (NET)", "nccl_op_count (NET)")

    def __init__(self, memory, layout, comms, device_memory=None):
        super().__init__()
        self.memory = memory
        self.layout = layout
        self.comms = comms
        self.device = device_memory
        self.communicators_read = 0
        self.counters = {}  # counter address the kernel polls -> (record, side); for the kernel join
        self._proxy_subs = {}  # ncclProxyConnection address -> sub-args dict
        self._proxy_states_read = set()
        self._device_unread = 0

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
        records = []
        for c in range(max(0, min(nchannels, MAX_CHANNELS))):
            channel = base + self.layout.off("ncclComm.channels") + c * self.layout.sizes["ncclChannel"]
            records.append(self._channel(channel, c, rank, nranks, nccl_comm, watchdog_hash))
        return records

    def _channel(self, channel, c, rank, nranks, nccl_comm, watchdog_hash):
        prev = self._signed(channel, "ncclChannel.ring.prev")
        next_ = self._signed(channel, "ncclChannel.ring.next")
        record = ring_records.new_record(watchdog_hash, "", None, c, rank, nranks, prev, next_, self.name,
                                         algorithm="RING", protocol="", nccl_comm=nccl_comm)
        peers = self._field(channel, "ncclChannel.peers")
        dev_peers = self._field(channel, "ncclChannel.devPeersHostPtr")
        for side, peer in (("recv", prev), ("send", next_)):
            if not (0 <= peer < nranks) or not peers:
                continue
            try:
                record[side] = self._connection(record, side, peer, peers, dev_peers)
            except MemoryReadError as e:
                self.errors.append(f"comm {nccl_comm} channel {c} {side} (peer {peer}): {e}")
        return record

    def _connection(self, record, side, peer, peers, dev_peers):
        L = self.layout
        peer_at = self.memory.pointer(peers + 8 * peer)
        # Rings use connector 0 of send[]/recv[] (1 is for p2p over the network, NVLS, ...).
        connector = peer_at + L.off(f"ncclChannelPeer.{side}")
        if not self._field(connector, "ncclConnector.connected"):
            return None  # NCCL connects rings when first used (NCCL_RUNTIME_CONNECT)
        conn = connector + L.off("ncclConnector.conn")
        tail_at, head_at = self._field(conn, "ncclConnInfo.tail"), self._field(conn, "ncclConnInfo.head")
        transport = self._transport(self._field(connector, "ncclConnector.transportComm"), side)
        # recv waits on its tail (what the peer delivered); send waits on its head (what the peer consumed)
        # and has written its own tail at the peer (what it posted).
        observed_at = tail_at if side == "recv" else head_at
        observed, where = self._counter(observed_at, transport)
        c = ring_records.seen_connection(record["prev"] if side == "recv" else record["next"], observed_step=observed)
        if side == "send":
            c["posted_step"], _ = self._counter(tail_at, transport)
        c["transport"] = transport
        c["counter_memory"] = where
        proxy = self._proxy_subs.get(self._field(connector, "ncclConnector.proxyConn.connection"))
        if proxy is not None:
            c["proxy"] = {k: proxy[k] for k in ("base", "nsteps", "posted", "received", "transmitted", "done")}
            c["base_step"] = proxy["base"]
            record["nccl_op_count"] = proxy["op_count"]
        else:
            c["base_step"] = self._device_step(dev_peers, record["prev"] if side == "recv" else record["next"], side)
        if observed_at:
            self.counters[observed_at] = (record, side)
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

    def _device_step(self, dev_peers, peer, side):
        """conn.step of the device copy: where the previous collective left this connection."""
        if self.device is None or not dev_peers or peer is None:
            return None
        L = self.layout
        try:
            dev_peer = self.memory.pointer(dev_peers + 8 * peer)  # a host array of device pointers
            at = dev_peer + L.off(f"ncclDevChannelPeer.{side}") + L.off("ncclConnInfo.step")  # connector 0
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
