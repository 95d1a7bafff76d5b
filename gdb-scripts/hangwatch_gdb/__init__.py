"""Ring progress readers loaded into gdb / cuda-gdb by collector_probe.py.

Modules without a `gdb` import (comm_hash, ring_records, cuda_kernels, spin_loop,
ptype_offsets) are plain Python and unit-tested outside the debugger; the others
(sim_ring_reader, cuda_ring_reader, nccl_host_layout, nccl_host_reader) need gdb.
"""
