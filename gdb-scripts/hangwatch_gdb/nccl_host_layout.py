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
    ("ncclChannel", "ring.next"),
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
# NCCL's enum ncclProxyOpState (src/include/proxy.h): sub-args hold live values only once
# the proxy thread has started the op (its base/posted/... are set on that transition).
PROXY_OP_IN_PROGRESS = 2


class NcclHostLayout:
    def __init__(self, offsets=None, sizes=None, missing=None):
        self.offsets = dict(offsets or {})  # "struct.path" -> (offset, size)
        self.sizes = dict(sizes or {})
        self.missing = list(missing or [])

    def off(self, key):
        return self.offsets[key][0]

    def size_of(self, key):
        return self.offsets[key][1]

    def to_json(self):
        return {"offsets": {k: {"offset": o, "size": s} for k, (o, s) in self.offsets.items()},
                "sizes": self.sizes, "missing": self.missing}

    @classmethod
    def from_json(cls, j):
        return cls({k: (v["offset"], v["size"]) for k, v in j["offsets"].items()}, j["sizes"], j.get("missing", []))

    @classmethod
    def from_debugger(cls):
        """Every FIELDS offset and SIZES size as the loaded libnccl.so.2's DWARF says (gdb)."""
        import gdb
        layout = cls()

        def struct(name):
            return gdb.lookup_type("struct " + name).strip_typedefs()

        for struct_name, path in FIELDS:
            try:
                layout.offsets[f"{struct_name}.{path}"] = _field_offset(struct(struct_name), struct_name, path)
            except (LookupError, gdb.error) as e:
                layout.missing.append(str(e))
        for struct_name in SIZES:
            try:
                layout.sizes[struct_name] = struct(struct_name).sizeof
            except gdb.error as e:
                layout.missing.append(str(e))
        return layout


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
