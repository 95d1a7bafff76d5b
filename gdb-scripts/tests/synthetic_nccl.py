"""Synthetic NCCL process memory laid out with the real libnccl.so.2's offsets.

The offsets come from gdb's `ptype /o` of the installed library (real_nccl.py), parsed by
ptype_offsets, not from NcclHostLayout: the walker under test reads with the offsets it
derives itself, so a wrong offset or a wrong step of the walk reads other bytes than the
builder wrote there. Host and device memory are separate address spaces: gdb reads only
the host one, cuda-gdb both."""
import struct

NCCL_MAGIC = 0x0280028002800280
PROXY_OP_READY, PROXY_OP_IN_PROGRESS = 1, 2  # enum ncclProxyOpState


class UnreadableMemory(Exception):
    pass


class SparseMemory:
    """Regions of bytes at addresses; anything else is unmapped (a read fails, as ptrace's does)."""

    def __init__(self, start):
        self._regions = []  # (base, bytearray)
        self._next = start

    def alloc(self, size, align=64):
        base = (self._next + align - 1) // align * align
        self._regions.append((base, bytearray(size)))
        self._next = base + size + 4096  # a gap: reads past the end fail
        return base

    def _region(self, address, size):
        for base, data in self._regions:
            if base <= address and address + size <= base + len(data):
                return base, data
        raise UnreadableMemory(f"{size} bytes at {address:#x} are not mapped")

    def write(self, address, raw):
        base, data = self._region(address, len(raw))
        data[address - base:address - base + len(raw)] = raw

    def read_memory(self, address, size):
        base, data = self._region(address, size)
        return bytes(data[address - base:address - base + size])

    def span(self):
        """(first address, bytes up to the end of the last region): gaps read as zeros."""
        first = min(base for base, _ in self._regions)
        end = max(base + len(data) for base, data in self._regions)
        out = bytearray(end - first)
        for base, data in self._regions:
            out[base - first:base - first + len(data)] = data
        return first, bytes(out)


# Far from where Linux puts a process's heap, libraries and stack, so a live process can
# map the host part at these addresses and leave the device part unmapped, as UVA does.
HOST_BASE = 0x200000000000
DEVICE_BASE = 0x300000000000


class SyntheticNccl:
    def __init__(self, ptype, sizes):
        self.ptype = ptype    # {struct: {dotted path: (offset, size)}} from ptype /o
        self.sizes = sizes    # {struct: total size}
        self.host = SparseMemory(HOST_BASE)
        self.device = SparseMemory(DEVICE_BASE)
        self._transports = {}

    def off(self, struct_name, path):
        return self.ptype[struct_name][path][0]

    def put(self, memory, base, struct_name, path, value):
        off, size = self.ptype[struct_name][path]
        if isinstance(value, str):  # a char array
            memory.write(base + off, value.encode().ljust(size, b"\0")[:size])
            return
        fmt = {1: "<B", 4: "<i", 8: "<Q"}[size]
        memory.write(base + off, struct.pack(fmt, value))

    def new(self, memory, struct_name, count=1):
        return memory.alloc(self.sizes[struct_name] * count)

    def transport(self, name):
        """The address of a struct ncclTransport named `name` (NCCL's netTransport, ...)."""
        if name not in self._transports:
            at = self.new(self.host, "ncclTransport")
            self.host.write(at + self.off("ncclTransport", "name"), name.encode().ljust(8, b"\0"))
            self._transports[name] = at
        return self._transports[name]

    def string(self, text):
        """A C string in host memory, its allocation ending at its NUL (as a mapping may)."""
        at = self.host.alloc(len(text) + 1, align=8)
        self.host.write(at, text.encode() + b"\0")
        return at

    def net(self, name):
        """An ncclNet_t named `name` (NCCL's ncclNetIb, ncclNetSocket, or a plugin's)."""
        at = self.new(self.host, "ncclNet_t")
        self.put(self.host, at, "ncclNet_t", "name", self.string(name))
        return at

    def ib_devices(self, counts, merged, ports):
        """NCCL's IB tables: ncclIbMergedDevs (merged: {netDev: (devName, [ncclIbDevs index, ...])})
        and ncclIbDevs (ports: {index: portNum}). counts: {table: elements}, as the DWARF says.
        Returns {table: (address, count)}: where a live process's library would have them."""
        merged_at = self.new(self.host, "ncclIbMergedDev", counts["ncclIbMergedDevs"])
        for net_dev, (name, devs) in merged.items():
            at = merged_at + net_dev * self.sizes["ncclIbMergedDev"]
            self.put(self.host, at, "ncclIbMergedDev", "devName", name)
            props = at + self.off("ncclIbMergedDev", "vProps")
            self.put(self.host, props, "ncclNetVDeviceProps_t", "ndevs", len(devs))
            for i, dev in enumerate(devs):
                self.host.write(props + self.off("ncclNetVDeviceProps_t", "devs") + 4 * i, struct.pack("<i", dev))
        devs_at = self.new(self.host, "ncclIbDev", counts["ncclIbDevs"])
        for index, port in ports.items():
            self.put(self.host, devs_at + index * self.sizes["ncclIbDev"], "ncclIbDev", "portNum", port)
        return {"ncclIbMergedDevs": (merged_at, counts["ncclIbMergedDevs"]),
                "ncclIbDevs": (devs_at, counts["ncclIbDevs"])}

    def socket_devices(self, count, names):
        """NCCL's ncclNetSocketDevs (names: {netDev: devName}); returns {table: (address, count)}."""
        at = self.new(self.host, "ncclNetSocketDev", count)
        for net_dev, name in names.items():
            self.put(self.host, at + net_dev * self.sizes["ncclNetSocketDev"], "ncclNetSocketDev", "devName", name)
        return {"ncclNetSocketDevs": (at, count)}

    def counter(self, where, value):
        memory = self.device if where == "device" else self.host
        at = memory.alloc(8, align=8)
        memory.write(at, struct.pack("<Q", value))
        return at


class Connection:
    """One ring connector as a test wants it: its transport, its counters and where they
    live, the device copy of conn.step, and for NET the proxy's sub-args and the netDev of its
    proxy connection's resources (same_process False: the connection is another process's, PXN)."""

    def __init__(self, transport, observed, posted=None, device_step=None, host_step=999, connected=True,
                 counters="device", proxy=None, proxy_state=PROXY_OP_IN_PROGRESS, op_count=0, net_dev=None,
                 same_process=True):
        self.transport = transport
        self.observed = observed      # recv: the tail; send: the head
        self.posted = posted          # send: the tail this rank writes at the peer
        self.device_step = device_step
        self.host_step = host_step    # the host copy, written at connect: never what a reader may report
        self.connected = connected
        self.counters = counters
        self.proxy = proxy            # {"base", "nsteps", "posted", "received", "transmitted", "done"}
        self.proxy_state = proxy_state
        self.op_count = op_count
        self.net_dev = net_dev
        self.same_process = same_process
        self.observed_at = None       # the counter address, once built (what the kernel polls)
        self.posted_at = None


def build_comm(nccl, rank, nranks, comm_hash, channels, magic=NCCL_MAGIC, net=None):
    """An ncclComm in nccl.host; channels: [{"prev", "next", "recv": Connection|None,
    "send": Connection|None, optional "up": int, "down": [int], "tree": {(side, peer):
    Connection}, "p2p": {(side, peer): Connection}}] (the tree's connections besides the ring's:
    NCCL uses connector 0 for both, so a peer that is a ring and a tree neighbour has one
    connection each way; p2p's are on connector 1); net: the name
    of its ncclNet (None: a null ncclNet). Returns its address."""
    h = nccl.host
    comm = nccl.new(h, "ncclComm")
    nccl.put(h, comm, "ncclComm", "startMagic", magic)
    nccl.put(h, comm, "ncclComm", "endMagic", magic)
    nccl.put(h, comm, "ncclComm", "commHash", comm_hash)
    nccl.put(h, comm, "ncclComm", "rank", rank)
    nccl.put(h, comm, "ncclComm", "nRanks", nranks)
    nccl.put(h, comm, "ncclComm", "nChannels", len(channels))
    proxy_state = nccl.new(h, "ncclProxyState")
    nccl.put(h, comm, "ncclComm", "proxyState", proxy_state)
    if net is not None:
        nccl.put(h, comm, "ncclComm", "ncclNet", nccl.net(net))
    proxy_ops = []
    for c, spec in enumerate(channels):
        ch = comm + nccl.off("ncclComm", "channels") + c * nccl.sizes["ncclChannel"]
        nccl.put(h, ch, "ncclChannel", "ring.prev", spec["prev"])
        nccl.put(h, ch, "ncclChannel", "ring.next", spec["next"])
        nccl.put(h, ch, "ncclChannel", "tree.up", spec.get("up", -1))
        down = (list(spec.get("down", [])) + [-1, -1, -1])[:3]
        h.write(ch + nccl.off("ncclChannel", "tree.down"), struct.pack("<3i", *down))
        nccl.put(h, ch, "ncclChannel", "id", c)
        conns = {("recv", spec["prev"]): spec.get("recv"), ("send", spec["next"]): spec.get("send"),
                 **spec.get("tree", {})}
        peers = h.alloc(8 * (nranks + 1))
        dev_peers_host = h.alloc(8 * (nranks + 1))
        nccl.put(h, ch, "ncclChannel", "peers", peers)
        nccl.put(h, ch, "ncclChannel", "devPeersHostPtr", dev_peers_host)
        for r in range(nranks):
            peer = nccl.new(h, "ncclChannelPeer")
            h.write(peers + 8 * r, struct.pack("<Q", peer))
            dev_peer = nccl.new(nccl.device, "ncclDevChannelPeer")
            h.write(dev_peers_host + 8 * r, struct.pack("<Q", dev_peer))
            for (side, want_peer), conn in conns.items():
                if r != want_peer or conn is None:
                    continue
                proxy_ops.extend(_connector(nccl, peer, dev_peer, side, conn))
            for (side, want_peer), conn in spec.get("p2p", {}).items():
                if r == want_peer:
                    proxy_ops.extend(_connector(nccl, peer, dev_peer, side, conn, index=1))
    _proxy_list(nccl, proxy_state, proxy_ops)
    return comm


def _connector(nccl, peer, dev_peer, side, conn, index=0):
    h = nccl.host
    # connector 0: the ring's, the tree's and PAT's; 1: point-to-point's
    connector = peer + nccl.off("ncclChannelPeer", side) + index * nccl.sizes["ncclConnector"]
    nccl.put(h, connector, "ncclConnector", "connected", int(conn.connected))
    transport = nccl.transport(conn.transport)
    nccl.put(h, connector, "ncclConnector", "transportComm", transport + nccl.off("ncclTransport", side))
    info = connector + nccl.off("ncclConnector", "conn")
    nccl.put(h, info, "ncclConnInfo", "step", conn.host_step)
    conn.observed_at = nccl.counter(conn.counters, conn.observed)
    if side == "recv":
        nccl.put(h, info, "ncclConnInfo", "tail", conn.observed_at)
        nccl.put(h, info, "ncclConnInfo", "head", nccl.counter(conn.counters, 0xdead))
    else:
        nccl.put(h, info, "ncclConnInfo", "head", conn.observed_at)
        conn.posted_at = nccl.counter(conn.counters, conn.posted if conn.posted is not None else 0xbeef)
        nccl.put(h, info, "ncclConnInfo", "tail", conn.posted_at)
    if conn.device_step is not None:
        dev_info = dev_peer + nccl.off("ncclDevChannelPeer", side) + index * nccl.sizes["ncclConnInfo"]
        nccl.put(nccl.device, dev_info, "ncclConnInfo", "step", conn.device_step)
    if conn.proxy is None and conn.net_dev is None:
        return []
    connection = nccl.new(h, "ncclProxyConnection")
    nccl.put(h, connector, "ncclConnector", "proxyConn.connection", connection)
    nccl.put(h, connector, "ncclConnector", "proxyConn.sameProcess", int(conn.same_process))
    if conn.net_dev is not None:
        resources = nccl.new(h, f"{side}NetResources")
        nccl.put(h, resources, f"{side}NetResources", "netDev", conn.net_dev)
        nccl.put(h, connection, "ncclProxyConnection", "transportResources", resources)
    return [(connection, conn)] if conn.proxy is not None else []


def _proxy_list(nccl, proxy_state, ops):
    """progressState.active: one ncclProxyArgs per connection (as ProxyAppend makes them),
    each with a queued op behind it on nextPeer, whose stale sub-args must not be read."""
    # Walked in the order built; the walker must follow `next`, not assume adjacency.
    h = nccl.host
    first = prev = None
    for connection, conn in ops:
        args = nccl.new(h, "ncclProxyArgs")
        nccl.put(h, args, "ncclProxyArgs", "state", conn.proxy_state)
        nccl.put(h, args, "ncclProxyArgs", "nsubs", 2)
        nccl.put(h, args, "ncclProxyArgs", "opCount", conn.op_count)
        # subs[0] moves another local rank's connection (PXN): only subs[1] is this comm's.
        other = args + nccl.off("ncclProxyArgs", "subs")
        nccl.put(h, other, "ncclProxySubArgs", "connection", h.alloc(128))
        nccl.put(h, other, "ncclProxySubArgs", "base", 5555)
        sub = other + nccl.sizes["ncclProxySubArgs"]
        nccl.put(h, sub, "ncclProxySubArgs", "connection", connection)
        for key, value in conn.proxy.items():
            nccl.put(h, sub, "ncclProxySubArgs", key, value)
        queued = nccl.new(h, "ncclProxyArgs")
        nccl.put(h, queued, "ncclProxyArgs", "state", PROXY_OP_READY)
        nccl.put(h, queued, "ncclProxyArgs", "nsubs", 1)
        qsub = queued + nccl.off("ncclProxyArgs", "subs")
        nccl.put(h, qsub, "ncclProxySubArgs", "connection", connection)
        nccl.put(h, qsub, "ncclProxySubArgs", "base", 7777)
        nccl.put(h, args, "ncclProxyArgs", "nextPeer", queued)
        if prev is None:
            first = args
        else:
            nccl.put(h, prev, "ncclProxyArgs", "next", args)
        prev = args
    if first:
        nccl.put(h, proxy_state, "ncclProxyState", "progressState.active", first)
