"""The cuda backend as one RingReader: NCCL's host structures of every communicator
(nccl_host_reader, gdb or cuda-gdb) and, under cuda-gdb, the hung kernel's waiting threads
(cuda_ring_reader), joined by the address of the counter a thread polls: the kernel's load
address equals the head/tail pointer in NCCL's host copy of that connection. A joined
record has the kernel's view of its waiting side (target and observed step from registers,
`waiting`, the op from the device function) and the host's of the rest."""
from . import ring_records
from .nccl_host_reader import P2P_KEY, PAT_KEY, TREE_KEY
from .ring_reader import RingReader


class CudaBackend(RingReader):
    name = "cuda"

    def __init__(self, host_reader, kernel_reader=None, no_kernel_reason=""):
        super().__init__()
        self.host = host_reader
        self.kernel = kernel_reader
        self.no_kernel_reason = no_kernel_reason
        self.joined = 0

    @property
    def fills(self):
        kernel = ("op", "algorithm", "protocol", "target_step and observed_step of the waiting side", "waiting",
                  "waiting_threads") if self.kernel else ()
        return tuple(self.host.fills if self.host else ()) + kernel

    def read(self):
        # The kernel first: its focus changes end with the focus back on a host thread, where
        # the host walk reads NCCL's memory.
        views = self.kernel.read() if self.kernel else []
        if self.host and any(v["collective"] == "SendRecv" for v in views):
            self.host.p2p = True  # a kernel waits in a transfer: its connections are connector 1's
        records, errors = self.host.read() if self.host else ([], [])
        errors = list(errors)
        if self.kernel is None:
            if self.no_kernel_reason:
                errors.append(f"kernel not read: {self.no_kernel_reason}")
            return _without_tree_keys(records), errors
        errors.extend(self.kernel.errors)
        errors.extend(self.kernel.not_read)
        counters = self.host.counters if self.host else {}
        for view in views:
            where = f"kernel {view['kernel']} block {view['block']} thread {view['thread']}"
            if view["side"]:
                where += f" ({view['side']})"
            hit = counters.get(view["counter_address"])
            if hit is None:
                errors.append(f"{where}: waits on the counter at {view['counter_address']:#x} (saw "
                              f"{view['observed']}, needs {view['target']}), which no connection of the "
                              "communicators read on the host has: not tied to a communicator")
                continue
            record, side, connection = hit
            # A ring thread's side is its index's (thread 0 recv, 1 send); a tree or PAT thread's is
            # its counter's: a recv tail or a send head of one connection of the channel.
            if view["side"] is not None and (side != view["side"] or record[side] is not connection):
                errors.append(f"{where}: its counter is the {side} side of channel {record['channel']}'s connection "
                              f"with rank {connection['peer']}, not its ring {view['side']}: not used")
                continue
            self._join(record, side, connection, view)
        _drop_unwritten_tails(records, self.kernel.flag_protocol_blocks, errors)
        # A p2p record is kept where a thread was found waiting on one of its connections: those.
        for record in self.host.p2p_records if self.host else []:
            waited = [dict(c, direction=side, role="p2p") for side, c in record[P2P_KEY] if c.get("waiting")]
            if waited:
                record["connections"] = waited
                records.append(record)
        for record in records:
            if record.get("algorithm") == "TREE":
                # The algorithm's own graph (ring_records: direction, role), as the sim reader writes it.
                record["connections"] = [dict(c, direction=side, role=role) for side, role, c in record[TREE_KEY]]
            elif record.get("algorithm") == "PAT":
                # The collective's own PAT peers (AllGather and ReduceScatter go opposite ways).
                pat = record.get(PAT_KEY, {}).get(record["op"], [])
                record["connections"] = [dict(c, direction=side, role="pat") for side, c in pat]
        return _without_tree_keys(records), errors

    def _join(self, record, side, c, view):
        c["target_step"] = view["target"]
        c["observed_step"] = view["observed"]
        c["waiting"] = True
        record["source"] = "cuda-registers"
        record["op"] = ring_records.op_name(view["collective"] or "")
        record["algorithm"] = view["algorithm"]
        record["protocol"] = view["protocol"]
        # tid: the CUDA thread index in its block (no OS thread waits in a kernel).
        record["waiting_threads"].append({"tid": view["thread"],
                                          "name": f"kernel {view['kernel']} block {view['block']}",
                                          "function": view["function"] or view["kernel_name"], "direction": side})
        self.joined += 1

    def summary(self):
        out = {"joined_waits": self.joined}
        if self.host:
            out.update(self.host.summary())
        if self.kernel:
            out["kernels"] = self.kernel.kernels
            out["threads_not_waiting"] = self.kernel.not_waiting
        return out


# Where a tail is the peer's count of steps written even under LL/LL128: NET's receive
# proxy writes recvTail for every protocol (src/transport/net.cc recvProxyProgress).
TAIL_WRITTEN_BY_PROXY = ("NET",)


def _drop_unwritten_tails(records, flag_blocks, errors):
    """LL and LL128 kernels write no tail (prims_ll.h; prims_ll128.h only with a connFifo):
    data is known to have arrived from flags inside the receive buffer, and conn.step moves on
    without it. So where a block ran one, the tail of a connection whose record no SIMPLE wait
    was joined to may be an older SIMPLE collective's: a receive tail on P2P or SHM (NET's proxy
    writes it), and a send's posted tail on any transport. Which channel a flag block is on is
    not known (its progress is in registers and flags), so every such record loses them."""
    if not flag_blocks:
        return
    dropped = set()
    for record in records:
        if record.get("source") == "cuda-registers":
            continue  # a SIMPLE wait joined: the kernel on this channel polls the tail itself
        connections = [("recv", record.get("recv")), ("send", record.get("send"))]
        connections += [(side, c) for side, _, c in record.get(TREE_KEY, [])]
        for side, c in connections:
            if c is None:
                continue
            proxied = c.get("transport") in TAIL_WRITTEN_BY_PROXY
            if side == "recv" and not proxied and c.get("observed_step") is not None:
                c["observed_step"] = None
                dropped.add((id(c), "recv"))
            if side == "send" and c.get("posted_step") is not None:
                c["posted_step"] = None
                dropped.add((id(c), "send"))
    if dropped:
        recv = sum(1 for _, side in dropped if side == "recv")
        blocks = "; ".join(flag_blocks[:3]) + ("; ..." if len(flag_blocks) > 3 else "")
        errors.append(f"{len(flag_blocks)} block(s) run LL or LL128 ({blocks}), whose kernels write no tail: "
                      f"{recv} receive tail(s) not on NET (P2P, SHM) and {len(dropped) - recv} send tail(s) of "
                      "channels no SIMPLE wait was found on were not used (they may be an older SIMPLE collective's)")


def _without_tree_keys(records):
    for record in records:
        record.pop(TREE_KEY, None)
        record.pop(PAT_KEY, None)
        record.pop(P2P_KEY, None)
    return records
