"""Picks the ring progress readers that fit the attached process and runs them."""
import gdb

from . import sim_ring_reader


def _is_cuda_gdb():
    return hasattr(gdb, "cuda")


def run(inferior):
    report = {"pid": inferior.pid, "threads": len(inferior.threads()), "ring_progress": [], "errors": [],
              "readers": []}
    if sim_ring_reader.available():
        reader = sim_ring_reader.SimRingReader(inferior)
        report["ring_progress"].extend(reader.read())
        report["errors"].extend(reader.errors)
        report["readers"].append({"name": "sim-frame", "waiting_threads": reader.threads_seen})
    else:
        from . import cuda_probe  # gdb.cuda and NCCL's DWARF: only on the cuda backend
        cuda_probe.run(inferior, report, _is_cuda_gdb())
    return report
