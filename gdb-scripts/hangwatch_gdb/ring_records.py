"""Ring progress records as the forensics dump stores them (DESIGN.md §5, plus the
additive keys documented in gdb-scripts/README.md), built from what a reader found.

Counter semantics, identical for every backend (NCCL SIMPLE / simnccl):
  recv (from prev): target_step = steps consumed + 1, i.e. the tail value the
      receiver needs; observed_step = the prev->rank tail (steps delivered).
  send (to next):   target_step = steps posted + 1 - NCCL_STEPS, i.e. the head
      value that frees the next slot; observed_step = the rank->next head (steps
      the next rank consumed); posted_step = steps this rank has written.
  base_step: the connection's count when this collective began on this rank, so
      observed_step - base_step is the collective's progress on that connection.
"""

NCCL_STEPS = 8


def op_name(name):
    """simnccl names ops "AllReduce"; NCCL's API (and the watchdog) says "ncclAllReduce"."""
    if not name:
        return ""
    return name if name.startswith("nccl") else "nccl" + name


def recv_connection(peer, consumed, observed, waiting, base_step=None):
    c = {"peer": known_rank(peer), "target_step": consumed + 1, "observed_step": observed, "waiting": waiting}
    if base_step is not None:
        c["base_step"] = base_step
    return c


def send_connection(peer, posted, observed, waiting, base_step=None, steps=NCCL_STEPS):
    c = {"peer": known_rank(peer), "target_step": max(0, posted + 1 - steps), "observed_step": observed,
         "waiting": waiting, "posted_step": posted}
    if base_step is not None:
        c["base_step"] = base_step
    return c


def seen_connection(peer, target_step=None, observed_step=None, waiting=False, base_step=None, posted_step=None):
    """A connection as a reader of memory sees it, each value None where it could not."""
    return {"peer": known_rank(peer), "target_step": target_step, "observed_step": observed_step, "waiting": waiting,
            "base_step": base_step, "posted_step": posted_step}


def progress(connection):
    """Steps of the current collective the connection's counter shows, as the verdict counts
    them (hangwatch::ringProgress): without a base, or with one past the counter, the count
    itself. None when the counter was not read."""
    if connection is None or connection.get("observed_step") is None:
        return None
    observed, base = connection["observed_step"], connection.get("base_step")
    return observed - base if base is not None and observed >= base else observed


def new_record(comm, op, seq, channel, rank, nranks, prev, next_, source, algorithm="RING", protocol="SIMPLE",
               nccl_comm=""):
    """comm: the watchdog's hash of the communicator when the reader can compute it;
    nccl_comm: NCCL's own id of it (its commHash), which joins through the snapshot's
    comms[].nccl_id when the watchdog's hash is not known here. A value the reader could
    not see is None (null in the dump: seq, channel, rank, prev, next, comm_size), never a
    stand-in such as 0 or -1."""
    return {"comm": comm, "nccl_comm": nccl_comm, "op": op_name(op), "seq": seq, "channel": channel,
            "rank": known_rank(rank), "prev": known_rank(prev), "next": known_rank(next_), "recv": None, "send": None,
            "comm_rank": known_rank(rank), "comm_size": nranks if nranks else None, "algorithm": algorithm,
            "protocol": protocol, "source": source, "stalled": False, "mismatch": None, "waiting_threads": []}


def known_rank(value):
    """A rank, peer or channel as the dump stores it: None when not known (negative)."""
    return value if value is not None and value >= 0 else None


def ring_neighbours(rank, nranks):
    if nranks <= 0:
        return -1, -1
    return (rank - 1) % nranks, (rank + 1) % nranks


class RecordSet:
    """Records keyed by (comm, seq, channel): NCCL waits on recv and send in different
    threads of one block, and both belong in one record."""

    def __init__(self):
        self._records = {}

    def get(self, key, make):
        if key not in self._records:
            self._records[key] = make()
        return self._records[key]

    def records(self):
        return sorted(self._records.values(),
                      key=lambda r: (r["comm"], r["nccl_comm"], _order(r["comm_rank"]), _order(r["seq"]),
                                     _order(r["channel"])))


def _order(value):
    return -1 if value is None else value
