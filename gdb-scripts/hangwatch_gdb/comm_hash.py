"""The communicator hash the watchdog writes into ranks/rNNNNN.watchdog.json
(comms[].hash): FNV-1a 64 over the 128 bytes of the ncclUniqueId given to
ncclCommInitRank, as 16 lower-case hex digits (watchdog/comm_table.cc)."""

# The watchdog's seed (CommTable::hashBytes), one digit shorter than FNV's standard
# offset basis 14695981039346656037: what matters here is equality with the watchdog.
FNV_OFFSET = 1469598103934665603
FNV_PRIME = 1099511628211
UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
SIM_ID_MAGIC = b"SIMNCCL1"


def fnv1a64(data, seed=FNV_OFFSET):
    h = seed
    for b in data:
        h ^= b
        h = (h * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def hash_hex(value):
    return "%016x" % value


def sim_unique_id(segment_name):
    """The ncclUniqueId simnccl made for a communicator whose segment is `segment_name`
    (simgpu/nccl/unique_id.cc): magic, then the name, NUL-padded; the last byte stays 0."""
    name = segment_name.encode()[: UNIQUE_ID_BYTES - len(SIM_ID_MAGIC) - 1]
    raw = SIM_ID_MAGIC + name
    return raw + b"\0" * (UNIQUE_ID_BYTES - len(raw))


def sim_comm_hash(segment_name):
    return hash_hex(fnv1a64(sim_unique_id(segment_name)))


# NCCL's own communicator id (its commHash), as NCCL hands it to a profiler plugin's
# init: simnccl takes FNV-1a 64 of the segment name with FNV's standard offset basis
# (simgpu/nccl/profiler_hooks.cc, communicatorId). The watchdog records it per
# communicator (comms[].nccl_id), so records join even when they cannot carry its hash.
NCCL_ID_FNV_OFFSET = 14695981039346656037


def sim_nccl_comm_id(segment_name):
    return hash_hex(fnv1a64(segment_name.encode(), NCCL_ID_FNV_OFFSET))
