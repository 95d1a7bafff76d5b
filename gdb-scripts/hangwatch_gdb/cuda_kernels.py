"""Text that cuda-gdb prints about NCCL kernels, parsed without a debugger.

`info cuda kernels` lists one row per running kernel:
  Kernel Parent Dev Grid Status SMs Mask GridDim BlockDim Invocation
  *      0      -   0   7  Active 0x00000003 (2,1,1) (640,1,1) ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)
NCCL names kernels ncclDevKernel_<Coll>_<RedOp>_<Type>_<ALGO>_<PROTO> (or a generic
ncclDevKernel_Generic*), and the device function that really runs, ncclDevFunc_..., shows
in the backtrace: a RING_LL kernel may dispatch to a RING_SIMPLE function (DESIGN.md §6).
"""
import re

ALGORITHMS = ("RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "NVLS", "PAT")
PROTOCOLS = ("LL128", "LL", "SIMPLE")
_COLLECTIVES = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv", "AllToAll"}

_ROW = re.compile(
    r"^\s*(?P<current>\*)?\s*(?P<kernel>\d+)\s+(?P<parent>\S+)\s+(?P<dev>\d+)\s+(?P<grid>-?\d+)\s+"
    r"(?P<status>\w+)\s+(?:(?P<sms>\S+)\s+)?(?P<mask>0x[0-9a-fA-F]+)\s+"
    r"\((?P<gx>\d+),(?P<gy>\d+),(?P<gz>\d+)\)\s+\((?P<bx>\d+),(?P<by>\d+),(?P<bz>\d+)\)\s+(?P<invocation>.+?)\s*$")


def parse_info_cuda_kernels(text):
    """Rows of `info cuda kernels` as dicts; header, blank and unknown lines are skipped."""
    kernels = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        invocation = m["invocation"]
        kernels.append({
            "kernel": int(m["kernel"]), "device": int(m["dev"]), "grid": int(m["grid"]), "status": m["status"],
            "sm_mask": int(m["mask"], 16), "current": bool(m["current"]),
            "grid_dim": (int(m["gx"]), int(m["gy"]), int(m["gz"])),
            "block_dim": (int(m["bx"]), int(m["by"]), int(m["bz"])),
            "name": invocation.split("(", 1)[0].strip(), "invocation": invocation,
        })
    return kernels


def nccl_kernels(kernels):
    return [k for k in kernels if k["name"].startswith("ncclDevKernel")]


def parse_nccl_function(name):
    """{"kind", "collective", "redop", "dtype", "algorithm", "protocol"} for an
    ncclDevKernel_/ncclDevFunc_ name; None where the name is not NCCL's. Generic kernels
    give algorithm and protocol None: the device function in the backtrace decides."""
    base = name.split("(", 1)[0].strip()
    base = base.split("<", 1)[0]
    for prefix, kind in (("ncclDevKernel_", "kernel"), ("ncclDevFunc_", "function")):
        if base.startswith(prefix):
            rest = base[len(prefix):]
            break
    else:
        return None
    parts = rest.split("_")
    info = {"kind": kind, "collective": None, "redop": None, "dtype": None, "algorithm": None, "protocol": None}
    if parts and parts[0] in _COLLECTIVES:
        info["collective"] = parts[0]
    if parts and parts[-1] in PROTOCOLS:
        info["protocol"] = parts[-1]
        algo_parts = parts[:-1]
        for length in (2, 1):
            candidate = "_".join(algo_parts[-length:])
            if len(algo_parts) >= length and candidate in ALGORITHMS:
                info["algorithm"] = candidate
                middle = algo_parts[1:-length] if info["collective"] else algo_parts[:-length]
                break
        else:
            middle = algo_parts[1:]
        if len(middle) >= 2:
            info["redop"], info["dtype"] = middle[0], middle[1]
        elif len(middle) == 1:
            info["dtype"] = middle[0]
    return info


def protocol_from_backtrace(kernel_name, frame_names):
    """The algorithm and protocol that run: the innermost ncclDevFunc_ frame wins over the
    kernel's own name (the kernel may be the LL variant that dispatches to SIMPLE)."""
    for frame in frame_names:
        info = parse_nccl_function(frame or "")
        if info and info["kind"] == "function" and info["protocol"]:
            return info["algorithm"], info["protocol"]
    info = parse_nccl_function(kernel_name) or {}
    return info.get("algorithm"), info.get("protocol")


def blocks_to_channels(channel_mask, nblocks):
    """Block b runs the channel of the b-th set bit of the kernel's channel mask."""
    channels = [c for c in range(64) if channel_mask >> c & 1]
    return {b: channels[b] for b in range(min(nblocks, len(channels)))}


def waiting_threads(protocol, nsend=1, nrecv=1, block_threads=None):
    """Thread indices in a block that wait on ring counters, as (thread, "recv"|"send"):
    SIMPLE: thread 0 on the recv tail, thread 1 on the send head (one peer each on a
    ring); LL/LL128: no tail, data flags in the buffer; threads tid < nsend wait on the head."""
    if protocol == "SIMPLE":
        return [(t, "recv") for t in range(nrecv)] + [(nrecv + t, "send") for t in range(nsend)]
    if protocol in ("LL", "LL128"):
        # Receivers poll flags in the buffer: any thread may be the one stuck; read thread 0.
        return [(t, "send") for t in range(nsend)] + [(0, "recv-flags")]
    return []
