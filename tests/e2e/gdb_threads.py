# gdb script (gdb -p PID -batch -nx -x gdb_threads.py): prints every thread of the
# attached process as JSON between two marker lines: OS name, LWP, frame function
# names innermost first, and the wait_* / stalled_* locals of the simnccl frames
# that say where each ring channel stopped.
import json

import gdb

RING_FRAMES = {
    "simnccl_wait_peer": ["wait_channel", "wait_peer", "wait_direction", "wait_target_step",
                          "wait_observed_step", "wait_seq", "wait_rank", "wait_op"],
    "simnccl_device_stalled": ["stalled_rank", "stalled_channel", "stalled_seq", "stalled_op"],
}


def read_local(frame, name):
    try:
        value = frame.read_var(name)
    except (ValueError, gdb.error):
        return None
    try:
        if value.type.strip_typedefs().code == gdb.TYPE_CODE_PTR:
            return value.string()
        return int(value)
    except gdb.error:
        return None


def describe_thread(thread):
    thread.switch()
    frames = []
    ring = {}
    frame = gdb.newest_frame()
    while frame is not None:
        name = frame.name() or "??"
        frames.append(name)
        if name in RING_FRAMES and not ring:
            ring = {"function": name, **{v: read_local(frame, v) for v in RING_FRAMES[name]}}
        try:
            frame = frame.older()
        except gdb.error:
            break
    return {"lwp": thread.ptid[1], "name": thread.name or "", "frames": frames, "ring": ring or None}


threads = [describe_thread(t) for t in gdb.selected_inferior().threads()]
print("HANGWATCH-E2E-THREADS-BEGIN")
print(json.dumps(threads))
print("HANGWATCH-E2E-THREADS-END")
