"""Offsets of the NCCL host structures the cuda backend walks, derived at run time from
libnccl.so.2's own DWARF through gdb's type system: nothing here is a hard-coded offset,
so a different NCCL build just gives different numbers (or names what it lacks).
NcclHostLayout itself is plain data, so tests can rebuild it from what gdb printed."""

# (struct, dotted field path): what nccl_host_reader reads. ncclComm -> channels[c] ->
# peers[r] (host ncclChannelPeer: connectors) and devPeersHostPtr[r] (the device copy
# the kernel updates); ncclConnector -> transportComm (inside NCCL's ncclTransport, whose
# name says P2P/SHM/NET) and proxyConn.connection; ncclComm -> proxyState ->
# progressState.active -> ncclProxyArgs list -> subs[] (ncclProxySubArgs).
FIELDS = (
    ("ncclComm", "startMagic"), ("ncclComm", "endMagic"), ("ncclComm", "commHash"), ("ncclComm", "rank"),
    ("ncclComm", "nRanks"), ("ncclComm", "nChannels"), ("ncclComm", "channels"), ("ncclComm", "proxyState"),
    ("ncclChannel", "peers"), ("ncclChannel", "devPeersHostPtr"), ("ncclChannel", "ring.prev"),
    ("ncclChannel", "ring.next"), ("ncclChannel", "tree.up"), ("ncclChannel", "tree.down"),
    ("ncclChannelPeer", "send"), ("ncclChannelPeer", "recv"),
    ("ncclDevChannelPeer", "send"), ("ncclDevChannelPeer", "recv"),
    ("ncclConnector", "connected"), ("ncclConnector", "conn"), ("ncclConnector", "transportComm"),
    ("ncclConnector", "proxyConn.connection"),
    ("ncclConnInfo", "tail"), ("ncclConnInfo", "head"), ("ncclConnInfo", "step"),
    ("ncclTransport", "name"), ("ncclTransport", "send"), ("ncclTransport", "recv"),
    ("ncclProxyState", "progressState.active"),
    ("ncclProxyArgs", "subs"), ("ncclProxyArgs", "nsubs"), ("ncclProxyArgs", "opCount"), ("ncclProxyArgs", "state"),
    ("ncclProxyArgs", "next"),
    ("ncclProxySubArgs", "connection"), ("ncclProxySubArgs", "nsteps"), ("ncclProxySubArgs", "base"),
    ("ncclProxySubArgs", "posted"), ("ncclProxySubArgs", "received"), ("ncclProxySubArgs", "transmitted"),
    ("ncclProxySubArgs", "done"),
)
SIZES = ("ncclComm", "ncclChannel", "ncclChannelPeer", "ncclDevChannelPeer", "ncclConnector", "ncclConnInfo",
         "ncclTransport", "ncclProxyArgs", "ncclProxySubArgs")
# The NIC of a NET connection: the connector's proxy connection (in this process only where
# proxyConn.sameProcess is 1; PXN's lives in another) holds send/recvNetResources
# (src/transport/net.cc) with netDev, an index into the device table of the communicator's net
# (ncclComm.ncclNet->name): NCCL's IB (net_ib.cc) or Socket (net_socket.cc) globals.
# What a build lacks here costs the NIC only, not the walk: it goes to nic_missing.
NIC_FIELDS = (
    ("ncclConnector", "proxyConn.sameProcess"), ("ncclProxyConnection", "transportResources"),
    ("sendNetResources", "netDev"), ("recvNetResources", "netDev"), ("ncclComm", "ncclNet"), ("ncclNet_t", "name"),
    ("ncclIbMergedDev", "vProps"), ("ncclIbMergedDev", "devName"), ("ncclNetVDeviceProps_t", "ndevs"),
    ("ncclNetVDeviceProps_t", "devs"), ("ncclIbDev", "portNum"), ("ncclNetSocketDev", "devName"),
)
NIC_SIZES = ("ncclIbMergedDev", "ncclIbDev", "ncclNetSocketDev")
# (variable, element struct): IB's merged devices and Socket's interfaces are indexed by
# netDev, IB's ports (ncclIbDevs) by a merged device's vProps.devs[i].
NIC_GLOBALS = (("ncclIbMergedDevs", "ncclIbMergedDev"), ("ncclIbDevs", "ncclIbDev"),
               ("ncclNetSocketDevs", "ncclNetSocketDev"))
# NCCL's enum ncclProxyOpState (src/include/proxy.h): sub-args hold live values only once
# the proxy thread has started the op (its base/posted/... are set on that transition).
PROXY_OP_IN_PROGRESS = 2


class NcclHostLayout:
    def __init__(self, offsets=None, sizes=None, missing=None, globals_=None, nic_missing=None):
        self.offsets = dict(offsets or {})  # "struct.path" -> (offset, size)
        self.sizes = dict(sizes or {})
        self.missing = list(missing or [])  # what the walk needs: it does not run without
        self.globals = dict(globals_ or {})  # NCCL's static array -> (address, element count)
        self.nic_missing = list(nic_missing or [])  # NIC_*: NET connections' NIC not (fully) read

    def off(self, key):
        return self.offsets[key][0]

    def size_of(self, key):
        return self.offsets[key][1]

    def global_at(self, name):
        return self.globals[name][0]

    def global_count(self, name):
        return self.globals[name][1]

    def has(self, *keys):
        """Whether every key (a field, a struct size or a global) was found in the library."""
        return all(k in self.offsets or k in self.sizes or k in self.globals for k in keys)

    def to_json(self):
        return {"offsets": {k: {"offset": o, "size": s} for k, (o, s) in self.offsets.items()},
                "sizes": self.sizes, "missing": self.missing,
                "globals": {k: {"address": a, "count": n} for k, (a, n) in self.globals.items()},
                "nic_missing": self.nic_missing}

    @classmethod
    def from_json(cls, j):
        return cls({k: (v["offset"], v["size"]) for k, v in j["offsets"].items()}, j["sizes"], j.get("missing", []),
                   {k: (v["address"], v["count"]) for k, v in j.get("globals", {}).items()}, j.get("nic_missing", []))

    @classmethod
    def from_debugger(cls):
        """Every FIELDS offset and SIZES size as the loaded libnccl.so.2's DWARF says (gdb),
        and the NIC_* ones with NIC_GLOBALS' addresses."""
        import gdb
        layout = cls()
        layout._derive(gdb, FIELDS, SIZES, layout.missing)
        layout._derive(gdb, NIC_FIELDS, NIC_SIZES, layout.nic_missing)
        for name, element in NIC_GLOBALS:
            try:
                layout.globals[name] = _global_array(gdb, name, element)
            except (LookupError, gdb.error) as e:
                layout.nic_missing.append(str(e))
        return layout

    def _derive(self, gdb, fields, sizes, missing):
        for struct_name, path in fields:
            try:
                self.offsets[f"{struct_name}.{path}"] = _field_offset(_struct(gdb, struct_name), struct_name, path)
            except (LookupError, gdb.error) as e:
                missing.append(str(e))
        for struct_name in sizes:
            try:
                self.sizes[struct_name] = _struct(gdb, struct_name).sizeof
            except gdb.error as e:
                missing.append(str(e))


def _struct(gdb, name):
    """`struct name`, or the typedef `name` (ncclNet_t: a typedef of the versioned struct)."""
    try:
        return gdb.lookup_type("struct " + name).strip_typedefs()
    except gdb.error:
        return gdb.lookup_type(name).strip_typedefs()


def _global_array(gdb, name, element):
    """(address, element count) of NCCL's array variable `name` of struct `element`; raises
    LookupError. The address is the loaded library's (relocated) one in a live process."""
    symbol = gdb.lookup_global_symbol(name)
    if symbol is None and hasattr(gdb, "lookup_static_symbol"):
        symbol = gdb.lookup_static_symbol(name)  # file-static, as ncclNetSocketDevs is
    if symbol is None:
        raise LookupError(f"no variable {name}")
    value = symbol.value()  # lazy: its ~100 KB are not read
    t = value.type.strip_typedefs()
    if t.code != gdb.TYPE_CODE_ARRAY or t.target().strip_typedefs().tag != element:
        raise LookupError(f"{name} is a {value.type}, not an array of struct {element}")
    low, high = t.range()
    return int(value.address), high - low + 1


def _field_offset(t, struct_name, path):
    """(byte offset, byte size) of `path` inside the gdb type `t`; raises LookupError."""
    offset = 0
    for part in path.split("."):
        t = t.strip_typedefs()
        field = next((f for f in t.fields() if f.name == part), None)
        if field is None:
            raise LookupError(f"struct {struct_name} has no field {path} (at {part})")
        offset += field.bitpos // 8
        t = field.type
    return offset, t.strip_typedefs().sizeof
