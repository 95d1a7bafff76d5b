"""Runs the ring reader of the backend the collector chose for this process.

The collector decides once, from the process's own mappings (simgpu's libraries: sim; the
real libnccl.so.2 / libcuda.so.1: cuda), and passes it in $HANGWATCH_PROBE (JSON): the
backend, the debugger it started, and for cuda the communicators of the watchdog's comm
table (address = the ncclComm_t, NCCL's id, the watchdog's hash). Run by hand without it,
the script guesses from the symbols it finds, and says so."""
import json
import os

import gdb

from . import sim_ring_reader
from .ring_reader import NoRingReader

PROBE_ENV = "HANGWATCH_PROBE"


def probe_args():
    text = os.environ.get(PROBE_ENV, "")
    if not text:
        return {}
    try:
        args = json.loads(text)
        return args if isinstance(args, dict) else {}
    except ValueError:
        return {"_error": f"${PROBE_ENV} is not JSON"}


def _has_nccl_types():
    try:
        gdb.lookup_type("struct ncclComm")
        return True
    except gdb.error:
        return False


def _guess_backend():
    if sim_ring_reader.available():
        return "sim"
    return "cuda" if _has_nccl_types() else ""


def _cuda_reader(inferior, args, notes):
    from . import cuda_backend, cuda_gdb, nccl_comm_finder, nccl_host_layout, nccl_host_reader
    from .cuda_ring_reader import CudaKernelReader
    gdb.execute("set max-value-size unlimited")  # ncclComm is ~1 MB
    device = cuda_gdb.reads_device_memory()
    if args.get("debugger") == "cuda-gdb" and not device:
        notes.append("the collector started cuda-gdb, but it has no `info cuda` commands: read as gdb")
    layout = nccl_host_layout.NcclHostLayout.from_debugger()
    host = None
    if layout.missing:
        notes.extend(f"NCCL host layout: {m} (is libnccl.so.2 loaded, with its DWARF?)" for m in layout.missing)
    else:
        comms = []
        for c in args.get("comms") or []:
            try:
                comms.append(nccl_host_reader.CommAddress(int(str(c.get("address", "")), 16), "watchdog",
                                                          c.get("hash", ""), c.get("nccl_id") or ""))
            except (ValueError, AttributeError):
                notes.append(f"comm table entry without a usable address: {c}")
        if not comms:
            comms = nccl_comm_finder.comms_in_frames(inferior)
            notes.append(f"no communicators from the watchdog's comm table ({args.get('comm_table') or 'none given'});"
                         f" fallback: `comm` variables in NCCL's frames found {len(comms)}")
        host = nccl_host_reader.NcclHostReader(cuda_gdb.host_memory(inferior), layout, comms,
                                               cuda_gdb.device_memory() if device else None)
    if device:
        return cuda_backend.CudaBackend(host, CudaKernelReader(cuda_gdb.CudaGdb()))
    return cuda_backend.CudaBackend(host, None, "the debugger is gdb, not cuda-gdb: the kernel's registers and "
                                                "device memory cannot be read (NCCL's host structures only)")


def run(inferior):
    args = probe_args()
    report = {"pid": inferior.pid, "threads": len(inferior.threads()), "ring_progress": [], "errors": [],
              "readers": []}
    notes = report["errors"]
    if "_error" in args:
        notes.append(args.pop("_error"))
    backend = args.get("backend", "")
    if not backend:
        backend = _guess_backend()
        notes.append(f"no backend from the collector (${PROBE_ENV}): guessed '{backend or 'none'}' from the symbols")
    report["backend"] = backend
    if backend == "sim":
        sim_ring_reader.load_symbols()
        reader = (sim_ring_reader.SimRingReader(inferior) if sim_ring_reader.available()
                  else NoRingReader("backend sim, but simnccl's wait functions are not in this process"))
    elif backend == "cuda":
        reader = _cuda_reader(inferior, args, notes)
    else:
        reader = NoRingReader(f"backend '{backend or 'none'}': neither simgpu nor NCCL is loaded in this process")
    records, errors = reader.read()
    report["ring_progress"].extend(records)
    notes.extend(errors)
    report["readers"].append(reader.describe())
    return report
