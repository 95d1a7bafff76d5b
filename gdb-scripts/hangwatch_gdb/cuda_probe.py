"""cuda backend: the kernel reader (cuda-gdb) and the NCCL host-structure reader (gdb
or cuda-gdb, libnccl.so.2's DWARF). UNTESTED ON HARDWARE: issue 7 runs it on a GPU."""
import gdb

from . import nccl_host_layout, nccl_host_reader


def run(inferior, report, is_cuda_gdb):
    gdb.execute("set max-value-size unlimited")
    if is_cuda_gdb:
        from . import cuda_ring_reader
        reader = cuda_ring_reader.CudaRingReader()
        try:
            report["ring_progress"].extend(reader.read())
        except gdb.error as e:
            report["errors"].append(f"cuda kernel reader: {e}")
        report["errors"].extend(reader.errors)
        report["readers"].append({"name": "cuda-registers"})
    try:
        layout = nccl_host_layout.NcclHostLayout()
    except gdb.error as e:
        report["errors"].append(f"NCCL host layout: {e} (is libnccl.so.2 loaded?)")
        return
    if layout.missing:
        report["errors"].extend(f"NCCL host layout: {m}" for m in layout.missing)
        return
    host = nccl_host_reader.NcclHostReader(inferior, layout)
    comms = nccl_host_reader.find_comms(inferior)
    for comm in comms:
        try:
            report["ring_progress"].extend(host.read_comm(comm))
        except (gdb.error, gdb.MemoryError, KeyError) as e:
            report["errors"].append(f"ncclComm at {comm:#x}: {e}")
    report["errors"].extend(host.errors)
    report["readers"].append({"name": "nccl-host", "communicators": len(comms)})
