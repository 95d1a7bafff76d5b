"""Fallback for finding communicators when the collector has no watchdog comm table (a
process collected by hand, or a snapshot that was not written): `comm` variables of type
ncclComm* in NCCL's own frames. It finds those of host threads blocked inside an NCCL
call only; NCCL's proxy threads hold just `proxyState`, so a process whose main thread is
not inside NCCL gives none (gdb)."""
import gdb

from .nccl_host_reader import CommAddress

MAX_FRAMES = 32


def comms_in_frames(inferior):
    found = set()
    original = gdb.selected_thread()
    for thread in inferior.threads():
        try:
            thread.switch()
            frame, depth = gdb.newest_frame(), 0
            while frame is not None and depth < MAX_FRAMES:
                try:
                    v = frame.read_var("comm")
                    if str(v.type.strip_typedefs().target()).endswith("ncclComm"):
                        found.add(int(v))
                except (gdb.error, ValueError, RuntimeError):
                    pass
                frame, depth = frame.older(), depth + 1
        except gdb.error:
            continue
    if original is not None and original.is_valid():
        original.switch()
    return [CommAddress(a, "frame") for a in sorted(found) if a]
