"""Offsets of the NCCL host structures the ring readers need, derived at run time from
libnccl.so.2's own DWARF through gdb's type system: nothing here is a hard-coded offset,
so a different NCCL build just gives different numbers (or names what it lacks)."""
import gdb

# (struct, dotted field path): what nccl_host_reader reads.
FIELDS = (
    ("ncclComm", "startMagic"), ("ncclComm", "endMagic"), ("ncclComm", "commHash"), ("ncclComm", "rank"),
    ("ncclComm", "nRanks"), ("ncclComm", "nChannels"), ("ncclComm", "opCount"), ("ncclComm", "channels"),
    ("ncclComm", "proxyState"),
    ("ncclChannel", "peers"), ("ncclChannel", "ring.prev"), ("ncclChannel", "ring.next"), ("ncclChannel", "id"),
    ("ncclChannelPeer", "send"), ("ncclChannelPeer", "recv"),
    ("ncclConnector", "connected"), ("ncclConnector", "conn"), ("ncclConnector", "proxyConn.connection"),
    ("ncclConnInfo", "tail"), ("ncclConnInfo", "head"), ("ncclConnInfo", "step"), ("ncclConnInfo", "stepSize"),
    ("ncclProxySubArgs", "channelId"), ("ncclProxySubArgs", "peer"), ("ncclProxySubArgs", "nsteps"),
    ("ncclProxySubArgs", "base"), ("ncclProxySubArgs", "posted"), ("ncclProxySubArgs", "received"),
    ("ncclProxySubArgs", "transmitted"), ("ncclProxySubArgs", "done"), ("ncclProxySubArgs", "end"),
)
SIZES = ("ncclComm", "ncclChannel", "ncclChannelPeer", "ncclConnector", "ncclConnInfo", "ncclProxySubArgs")


def _struct(name):
    return gdb.lookup_type("struct " + name).strip_typedefs()


def field_offset(struct_name, path):
    """(byte offset, byte size) of `path` inside `struct_name`; raises LookupError."""
    t = _struct(struct_name)
    offset = 0
    for part in path.split("."):
        t = t.strip_typedefs()
        field = next((f for f in t.fields() if f.name == part), None)
        if field is None:
            raise LookupError(f"struct {struct_name} has no field {path} (at {part})")
        offset += field.bitpos // 8
        t = field.type
    return offset, t.strip_typedefs().sizeof


class NcclHostLayout:
    def __init__(self):
        self.offsets = {}
        self.sizes = {}
        self.missing = []
        for struct_name, path in FIELDS:
            try:
                self.offsets[f"{struct_name}.{path}"] = field_offset(struct_name, path)
            except (LookupError, gdb.error) as e:
                self.missing.append(str(e))
        for struct_name in SIZES:
            try:
                self.sizes[struct_name] = _struct(struct_name).sizeof
            except gdb.error as e:
                self.missing.append(str(e))

    def off(self, key):
        return self.offsets[key][0]

    def to_json(self):
        return {"offsets": {k: {"offset": o, "size": s} for k, (o, s) in self.offsets.items()},
                "sizes": self.sizes, "missing": self.missing}
