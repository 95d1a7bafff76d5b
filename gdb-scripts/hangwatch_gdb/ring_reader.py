"""The one interface of the debugger phase: a RingReader reads where a process's ring
connections stand and returns records of one shape (ring_records.new_record) plus the
sentences for what it could not read. Backends: sim (sim_ring_reader) and cuda
(cuda_backend: NCCL's host structures, joined with the hung kernel's registers under
cuda-gdb). Plain Python: the debugger-facing parts are handed in."""


class RingReader:
    name = ""    # the records' `source`
    fills = ()   # record fields this reader can fill; the others stay None/"" (gdb-scripts/README.md)

    def __init__(self):
        self.errors = []

    def read(self):
        """(records, errors): records as ring_records builds them, errors as sentences."""
        raise NotImplementedError

    def summary(self):
        """What the reader saw, for the probe's `readers` list (counts, not records)."""
        return {}

    def describe(self):
        return {"name": self.name, "fills": list(self.fills), **self.summary()}


class NoRingReader(RingReader):
    """A process with neither simgpu nor NCCL loaded: there is no ring to read, and the
    report says so instead of showing an empty list as if nothing were stuck."""
    name = "none"

    def __init__(self, why):
        super().__init__()
        self.why = why

    def read(self):
        return [], [f"no ring reader: {self.why}"]
