"""simgpu backend: every simnccl channel thread that waits is read from the frame
locals of simnccl_wait_peer / simnccl_device_stalled / simnccl_wait_matching_op
(simgpu/nccl/ring_channel.cc), the sim analogue of a hung NCCL kernel's registers."""
import struct

import gdb

from . import comm_hash, ring_records
from .ring_reader import RingReader

WAIT_PEER = "simnccl_wait_peer"
DEVICE_STALLED = "simnccl_device_stalled"
WAIT_MATCHING_OP = "simnccl_wait_matching_op"
WAIT_FUNCTIONS = (WAIT_PEER, DEVICE_STALLED, WAIT_MATCHING_OP)
MAX_DEPTH = 8  # the wait function sits under a futex/nanosleep call or two
# The threads that call them: simnccl's channel threads (Communicator::channelMain) and its
# point-to-point threads (group.cc). Walking another thread's frames costs gdb a unity build's
# compilation unit to expand for each library frame (0.15-0.3 s each: streams, RAS, the
# program's own), most of the phase, and cannot find a wait function.
WAIT_THREADS = ("simnccl-ch", "simnccl-p2p")
RECV, SEND = 0, 1


# What the sim reader reads: simgpu's libraries (the wait functions' frames and simnccl's types),
# and the C and C++ runtimes whose frames sit under them (futex, condition variables), which
# gdb must unwind through. The collector attaches with `set auto-solib-add off` for the sim
# backend, so a process with a gigabyte of other libraries (PyTorch) costs gdb seconds, not a
# minute; run by hand, every library's symbols are already read and this changes nothing.
SIM_SYMBOLS = r"libsim\|libcudart\.so\|libcublas\|libnccl\.so\|libcuda\.so\|libc\.so\|libstdc++\|libgcc_s\|ld-linux\|libm\.so"


def load_symbols():
    try:
        gdb.execute(f"sharedlibrary {SIM_SYMBOLS}", to_string=True)
    except gdb.error:
        pass


def available():
    try:
        return gdb.lookup_global_symbol(WAIT_PEER) is not None or bool(gdb.lookup_symbol(WAIT_PEER)[0])
    except gdb.error:
        return False


def _u64(inferior, address):
    return struct.unpack("<Q", bytes(inferior.read_memory(address, 8)))[0]


def _var(frame, name):
    try:
        return frame.read_var(name)
    except (gdb.error, ValueError):
        return None


def _int(value, default=None):
    try:
        return int(value) if value is not None else default
    except (gdb.error, gdb.MemoryError):
        return default


def _cstr(value):
    try:
        return value.string() if value is not None and int(value) != 0 else ""
    except (gdb.error, gdb.MemoryError, UnicodeDecodeError):
        return ""


class CommunicatorInfo:
    """rank, size and the watchdog's hash of one simnccl::Communicator, found from the
    address of its aborted_ member (every wait function gets it as `abort`)."""

    def __init__(self, inferior, errors):
        self._inferior = inferior
        self._errors = errors
        self._cache = {}
        self._offset = None

    def _aborted_offset(self):
        if self._offset is None:
            t = gdb.lookup_type("simnccl::Communicator")
            self._offset = next(f.bitpos // 8 for f in t.fields() if f.name == "aborted_")
        return self._offset

    def lookup(self, abort_address):
        if abort_address in self._cache:
            return self._cache[abort_address]
        info = {"comm": "", "nccl_comm": "", "rank": None, "nranks": None}
        try:
            t = gdb.lookup_type("simnccl::Communicator")
            comm = gdb.Value(abort_address - self._aborted_offset()).cast(t.pointer()).dereference()
            info["rank"] = int(comm["rank_"])
            info["nranks"] = int(comm["nranks_"])
            # libstdc++: a unique_ptr with the default deleter is the bare pointer, a
            # std::string starts with its data pointer followed by its length.
            segment = _u64(self._inferior, int(comm["segment_"].address))
            seg_type = gdb.lookup_type("simnccl::SharedSegment")
            name_field = next(f for f in seg_type.fields() if f.name == "name_")
            name_at = segment + name_field.bitpos // 8
            data, length = _u64(self._inferior, name_at), _u64(self._inferior, name_at + 8)
            if 0 < length < 4096:
                name = bytes(self._inferior.read_memory(data, length)).decode(errors="replace")
                info["comm"] = comm_hash.sim_comm_hash(name)
                info["nccl_comm"] = comm_hash.sim_nccl_comm_id(name)
        except (gdb.error, gdb.MemoryError, StopIteration, ValueError) as e:
            self._errors.append(f"communicator at abort flag {abort_address:#x}: {e}")
        self._cache[abort_address] = info
        return info


def _nic(end):
    """The NIC of a NET end as simnccl's host state says: the end's net_dev indexes
    simnccl_net_devs, as NCCL's send/recvNetResources.netDev indexes its net's device table
    (net_devices.h). None inside a node, or on a simgpu without the table."""
    try:
        index = int(end["net_dev"])
    except gdb.error:
        return None
    if index < 0:
        return None
    try:
        if index >= int(gdb.parse_and_eval("simnccl_nnet_devs")):
            return {"index": index, "device": None, "port": None}
        dev = gdb.parse_and_eval("simnccl_net_devs")[index]
        port = int(dev["portNum"])
        return {"index": index, "device": dev["devName"].string(), "port": port if port > 0 else None}
    except (gdb.error, gdb.MemoryError):
        return {"index": index, "device": None, "port": None}


def _wait_frame(thread):
    frame = gdb.newest_frame()
    depth = 0
    while frame is not None and depth < MAX_DEPTH:
        name = frame.name()
        if name in WAIT_FUNCTIONS:
            return frame, name
        frame = frame.older()
        depth += 1
    return None, None


def _site_fields(frame):
    site = _var(frame, "wait_site")
    if site is None or _int(site, 0) == 0:
        return None
    try:
        s = site.dereference()
        other_peer = int(s["other_peer"])
        fields = {"nranks": int(s["nranks"]), "target_step": int(s["target_step"]), "base_step": int(s["base_step"]),
                  "other_peer": other_peer, "other_step_at": int(s["other_step"]),
                  "other_counter_at": int(s["other_counter"]), "other_base_step": int(s["other_base_step"])}
    except (gdb.error, gdb.MemoryError):
        return None
    try:  # simgpu before 2026-11-27 ran only the ring and had no algorithm in the site
        fields["algorithm"] = _cstr(s["algorithm"]) or "RING"
    except (gdb.error, gdb.MemoryError):
        fields["algorithm"] = "RING"
    return fields


class SimRingReader(RingReader):
    name = "sim-frame"
    fills = ("comm", "nccl_comm", "op", "seq", "channel", "rank", "prev", "next", "recv", "send", "comm_size",
             "target_step", "observed_step", "base_step", "posted_step", "waiting", "stalled", "mismatch",
             "waiting_threads")

    def __init__(self, inferior):
        super().__init__()
        self.inferior = inferior
        self.comms = CommunicatorInfo(inferior, self.errors)
        self.records = ring_records.RecordSet()
        self.threads_seen = 0

    def read(self):
        original = gdb.selected_thread()
        for thread in self.inferior.threads():
            if not (thread.name or "").startswith(WAIT_THREADS):
                continue
            try:
                thread.switch()
                frame, function = _wait_frame(thread)
                if frame is None:
                    continue
                self.threads_seen += 1
                waiter = {"tid": thread.ptid[1], "name": thread.name or "", "function": function}
                if function == DEVICE_STALLED:
                    self._stalled(frame, waiter)
                else:
                    self._waiting(frame, function, waiter)
            except (gdb.error, gdb.MemoryError) as e:
                self.errors.append(f"thread {thread.ptid[1]}: {e}")
        if original is not None and original.is_valid():
            original.switch()
        return self.records.records(), self.errors

    def summary(self):
        return {"waiting_threads": self.threads_seen}

    def _comm(self, frame, abort_name):
        abort = _int(_var(frame, abort_name), 0)
        return self.comms.lookup(abort) if abort else {"comm": "", "nccl_comm": "", "rank": None, "nranks": None}

    def _record(self, comm, op, seq, channel, rank, nranks):
        prev, next_ = ring_records.ring_neighbours(rank, nranks or 0) if rank is not None else (None, None)
        # One record per communicator rank: a process that drives several devices holds several
        # ranks of one communicator, each with its own channels (nccl-tests -g/-t, ncclCommInitAll).
        key = (comm["comm"] or "?", rank, seq, channel)
        return self.records.get(key, lambda: ring_records.new_record(comm["comm"], op, seq, channel, rank,
                                                                     nranks, prev, next_, "sim-frame",
                                                                     nccl_comm=comm["nccl_comm"]))

    def _waiting(self, frame, function, waiter):
        comm = self._comm(frame, "wait_abort")
        site = _site_fields(frame)
        channel = _int(_var(frame, "wait_channel"))
        peer = _int(_var(frame, "wait_peer"))
        seq = _int(_var(frame, "wait_seq"))
        op = _cstr(_var(frame, "wait_op"))
        if function == WAIT_PEER:
            rank = _int(_var(frame, "wait_rank"), comm["rank"])
            direction = _int(_var(frame, "wait_direction"), RECV)
            target = _int(_var(frame, "wait_target_step"))
            observed = _int(_var(frame, "wait_observed_step"))
        else:
            rank = comm["rank"]
            direction = RECV
            target = site["target_step"] if site else None
            observed = target  # the step arrived; what it carries is the problem
        nranks = site["nranks"] if site else comm["nranks"]
        record = self._record(comm, op, seq, channel, rank, nranks)
        if site:
            # A tree rank waits on its parent and children: its peers are not a ring's prev and next.
            record["algorithm"] = site["algorithm"]
        waiter["direction"] = "recv" if direction == RECV else "send"
        record["waiting_threads"].append(waiter)
        base = site["base_step"] if site else None
        if target is None or observed is None:
            # A wait frame whose counters gdb could not read: the wait is known, the numbers are not.
            connection = ring_records.seen_connection(peer, target, observed, True, base)
        elif direction == RECV:
            connection = ring_records.recv_connection(peer, target - 1, observed, True, base)
        else:
            connection = ring_records.send_connection(peer, target - 1 + ring_records.NCCL_STEPS, observed, True,
                                                      base)
        if direction == RECV:
            record["prev"] = ring_records.known_rank(peer)
            record["recv"] = connection
        else:
            record["next"] = ring_records.known_rank(peer)
            record["send"] = connection
        if function == WAIT_MATCHING_OP:
            record["mismatch"] = {"arrived_seq": _int(_var(frame, "arrived_seq")),
                                  "arrived_op": ring_records.op_name(_cstr(_var(frame, "arrived_op")))}
        if site and site["other_peer"] >= 0:
            self._other_side(record, direction, site)
        waited = dict(connection, direction=waiter["direction"])
        self._channel_connections(record, frame, waited)

    def _channel_connections(self, record, frame, waited):
        """Every connection of the channel on the algorithm's graph (the wait site's ends): the
        one this thread waits on as its frame holds it, the others read live from memory."""
        site = _var(frame, "wait_site")
        if site is None or _int(site, 0) == 0:
            return
        try:
            s = site.dereference()
            ends = [("send", s["send_ends"][i].dereference()) for i in range(int(s["nsend_ends"]))]
            ends += [("recv", s["recv_ends"][i].dereference()) for i in range(int(s["nrecv_ends"]))]
        except (gdb.error, gdb.MemoryError):  # simgpu before 2026-11-28: the waited connection only
            return
        connections = []
        for direction, end in ends:
            try:
                peer = int(end["peer"])
                role = _cstr(end["role"])
                nic = _nic(end)
                if direction == waited["direction"] and peer == waited["peer"]:
                    connections.append(_with_nic(dict(waited, role=role), nic))
                    continue
                steps = _u64(self.inferior, int(end["step"]))
                counter_field = "head" if direction == "send" else "tail"
                counter = _u64(self.inferior, int(end["conn"][counter_field]["value"].address))
                base = int(end["base"]) if bool(end["started"]) else steps
            except (gdb.error, gdb.MemoryError) as e:
                self.errors.append(f"channel {record['channel']}: {direction} connection: {e}")
                continue
            make = ring_records.send_connection if direction == "send" else ring_records.recv_connection
            connections.append(_with_nic(dict(make(peer, steps, counter, False, base), direction=direction, role=role),
                                         nic))
        record["connections"] = connections
        for c in connections:  # the ring's recv/send are the same connections
            side = record.get(c["direction"])
            if c.get("nic") and side is not None and side.get("peer") == c["peer"]:
                side["nic"] = c["nic"]

    def _other_side(self, record, direction, site):
        """The channel's connection that this thread is not blocked on, read live from memory."""
        try:
            steps = _u64(self.inferior, site["other_step_at"])
            counter = _u64(self.inferior, site["other_counter_at"])
        except gdb.MemoryError as e:
            self.errors.append(f"channel {record['channel']}: other connection: {e}")
            return
        if direction == RECV and record["send"] is None:
            record["next"] = site["other_peer"]
            record["send"] = ring_records.send_connection(site["other_peer"], steps, counter, False,
                                                          site["other_base_step"])
        elif direction == SEND and record["recv"] is None:
            record["prev"] = site["other_peer"]
            record["recv"] = ring_records.recv_connection(site["other_peer"], steps, counter, False,
                                                          site["other_base_step"])

    def _stalled(self, frame, waiter):
        comm = self._comm(frame, "stalled_abort")
        rank = _int(_var(frame, "stalled_rank"), comm["rank"])
        record = self._record(comm, _cstr(_var(frame, "stalled_op")), _int(_var(frame, "stalled_seq")),
                              _int(_var(frame, "stalled_channel")), rank, comm["nranks"])
        record["stalled"] = True
        waiter["direction"] = None
        record["waiting_threads"].append(waiter)


def _with_nic(connection, nic):
    if nic is not None:
        connection["nic"] = nic
    return connection
