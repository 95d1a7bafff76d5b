"""Host side of a real NCCL communicator, read from process memory with offsets that
NcclHostLayout derived from libnccl.so.2's DWARF. conn.step is written back only when
a kernel ends, so it is the step the hung collective started from (base_step); the
head/tail counters are readable here when they live in host memory (SHM, NET)."""
import struct

import gdb

from . import ring_records

MAX_FRAMES = 32


def _u(inferior, address, size):
    raw = bytes(inferior.read_memory(address, size))
    return struct.unpack("<" + {4: "i", 8: "Q"}[size], raw)[0]


def find_comms(inferior):
    """ncclComm addresses that NCCL's own frames hold in a `comm` variable (host threads
    blocked in an NCCL call, the proxy thread): NCCL's DWARF, not the training code's."""
    found = set()
    for thread in inferior.threads():
        try:
            thread.switch()
            frame, depth = gdb.newest_frame(), 0
            while frame is not None and depth < MAX_FRAMES:
                try:
                    v = frame.read_var("comm")
                    if str(v.type.strip_typedefs().target()).endswith("ncclComm"):
                        found.add(int(v))
                except (gdb.error, ValueError, RuntimeError):
                    pass
                frame, depth = frame.older(), depth + 1
        except gdb.error:
            continue
    return sorted(a for a in found if a)


class NcclHostReader:
    def __init__(self, inferior, layout):
        self.inferior = inferior
        self.layout = layout
        self.errors = []

    def _field(self, base, key):
        offset, size = self.layout.offsets[key]
        return _u(self.inferior, base + offset, size)

    def _counter(self, pointer):
        try:
            return _u(self.inferior, pointer, 8) if pointer else None
        except gdb.MemoryError:
            return None  # device memory (P2P): only the kernel reader sees it

    def read_comm(self, comm):
        L = self.layout
        if self._field(comm, "ncclComm.startMagic") != self._field(comm, "ncclComm.endMagic"):
            self.errors.append(f"ncclComm at {comm:#x}: start and end magic differ (not a live communicator)")
            return []
        rank, nranks = self._field(comm, "ncclComm.rank"), self._field(comm, "ncclComm.nRanks")
        nchannels = self._field(comm, "ncclComm.nChannels")
        comm_hash = "%016x" % self._field(comm, "ncclComm.commHash")
        channels_at = comm + L.off("ncclComm.channels")
        records = []
        for c in range(max(0, min(nchannels, 64))):
            ch = channels_at + c * L.sizes["ncclChannel"]
            prev, next_ = self._field(ch, "ncclChannel.ring.prev"), self._field(ch, "ncclChannel.ring.next")
            # The watchdog's hash is not in NCCL's memory: NCCL's own id joins through comms[].nccl_id.
            r = ring_records.new_record("", "", 0, c, rank, nranks, prev, next_, "nccl-host", protocol="",
                                        nccl_comm=comm_hash)
            peers = self._field(ch, "ncclChannel.peers")
            r["recv"] = self._connection(peers, prev, "recv")
            r["send"] = self._connection(peers, next_, "send")
            records.append(r)
        return records

    def _connection(self, peers, peer, side):
        if not peers or peer < 0:
            return None
        L = self.layout
        try:
            peer_at = _u(self.inferior, peers + 8 * peer, 8)
            conn = peer_at + L.off(f"ncclChannelPeer.{side}") + L.off("ncclConnector.conn")
            step = self._field(conn, "ncclConnInfo.step")
            tail = self._counter(self._field(conn, "ncclConnInfo.tail"))
            head = self._counter(self._field(conn, "ncclConnInfo.head"))
        except gdb.MemoryError as e:
            self.errors.append(f"peer {peer} {side}: {e}")
            return None
        # target_step stays 0: the live step is in the kernel's registers (cuda_ring_reader).
        if side == "recv":
            c = ring_records.recv_connection(peer, -1, tail if tail is not None else step, False, step)
        else:
            c = ring_records.send_connection(peer, step, head if head is not None else step, False, step)
            c["posted_step"] = None
        c["target_step"] = 0
        c["counter_in_host_memory"] = (tail if side == "recv" else head) is not None
        return c
