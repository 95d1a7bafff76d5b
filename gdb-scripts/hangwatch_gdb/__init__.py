"""Ring progress readers loaded into gdb / cuda-gdb by collector_probe.py.

One interface (ring_reader.RingReader: read() -> records, errors), two backends: sim
(sim_ring_reader) and cuda (cuda_backend = nccl_host_reader + cuda_ring_reader). Modules
without a `gdb` import are plain Python and unit-tested outside the debugger: comm_hash,
ring_records, ring_reader, process_memory, nccl_host_layout (data), nccl_host_reader,
cuda_ring_reader, cuda_backend, cuda_kernels, spin_loop, ptype_offsets. The debugger-facing
ones are probe, sim_ring_reader, cuda_gdb and nccl_comm_finder.
"""
