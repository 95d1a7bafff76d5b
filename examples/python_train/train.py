#!/usr/bin/env python3
"""python_train: the Python shape of a training job (dataloader thread, queue,
training loop) whose GPU work runs through libtrainshim.so.

Run one process per rank, e.g.
  examples/mpirun.sh -np 4 python3 examples/python_train/train.py --steps 20
"""
import argparse
import array
import ctypes
import gc
import os
import queue
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SHIM = REPO_ROOT / "build" / "examples" / "python_train" / "libtrainshim.so"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python_train", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--grad-mb", type=float, default=1.0)
    p.add_argument("--dataloader-ms", type=int, default=0, help="host work per batch in the dataloader thread")
    p.add_argument("--log-every", type=int, default=1)
    p.add_argument("--stall-rank", type=int)
    p.add_argument("--stall-at-step", type=int)
    p.add_argument("--stall-kind", choices=["host-loop", "dataloader", "sleep"], default="host-loop")
    p.add_argument("--mismatch-rank", type=int)
    p.add_argument("--mismatch-at-step", type=int)
    p.add_argument("--sync-every-layer", action="store_true")
    p.add_argument("--gc-pause-ms", type=int, default=0)
    p.add_argument("--gc-rank", type=int)
    p.add_argument("--gc-every", type=int, default=10)
    p.add_argument("--shim", help="path of libtrainshim.so (else $TRAIN_SHIM, else the build tree)")
    args = p.parse_args(argv)
    if args.stall_rank is not None and args.stall_at_step is None:
        p.error("--stall-rank needs --stall-at-step")
    if args.mismatch_rank is not None and args.mismatch_at_step is None:
        p.error("--mismatch-rank needs --mismatch-at-step")
    if args.steps < 0 or args.log_every < 1 or args.gc_every < 1:
        p.error("--steps must be >= 0, --log-every and --gc-every >= 1")
    return args


def load_shim(path):
    # RTLD_GLOBAL: OpenMPI's plugins, loaded later by MPI_Init, resolve symbols of libmpi.
    shim = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    c_size_p = ctypes.POINTER(ctypes.c_size_t)
    c_float_p = ctypes.POINTER(ctypes.c_float)
    signatures = {
        "shim_init": ([ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_double], ctypes.c_int),
        "shim_world_size": ([], ctypes.c_int),
        "shim_forward_backward": ([ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], None),
        "shim_allreduce_grads": ([ctypes.c_int], None),
        "shim_allgather": ([ctypes.c_int], None),
        "shim_optimizer_step": ([], None),
        "shim_sync": ([], None),
        "shim_verify": ([ctypes.c_int, c_size_p, c_float_p, c_float_p], ctypes.c_long),
        "shim_barrier": ([], None),
        "shim_abort": ([ctypes.c_int], None),
        "shim_finalize": ([], None),
    }
    for name, (argtypes, restype) in signatures.items():
        fn = getattr(shim, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return shim


def shim_path(args):
    return Path(args.shim or os.environ.get("TRAIN_SHIM") or DEFAULT_SHIM)


_shard_index_lock = threading.Lock()


def _open_shard_index(step):
    # Takes the index lock again: a plain Lock is not reentrant, so this never returns.
    with _shard_index_lock:
        return step


def _read_shard(step):
    with _shard_index_lock:
        return _open_shard_index(step)


class Dataloader(threading.Thread):
    """Produces batches into a bounded queue, as torch DataLoader workers feed a loop."""

    def __init__(self, steps, elements, host_ms, deadlock_at_step):
        super().__init__(name="dataloader", daemon=True)
        self.batches = queue.Queue(maxsize=2)
        self.steps = steps
        self.elements = elements
        self.host_ms = host_ms
        self.deadlock_at_step = deadlock_at_step

    def run(self):
        for step in range(self.steps):
            if step == self.deadlock_at_step:
                _read_shard(step)
            self.batches.put((step, self.prepare(step)))

    def prepare(self, step):
        deadline = time.monotonic() + self.host_ms / 1000.0
        batch = array.array("f", (((i * 31 + step * 17) % 101) / 101.0 for i in range(self.elements)))
        time.sleep(max(0.0, deadline - time.monotonic()))
        return batch


def stall_in_host_loop(step):
    spins = 0
    while True:
        spins += 1


def stall_in_sleep(step):
    while True:
        time.sleep(3600)


def gc_pause(ms):
    until = time.monotonic() + ms / 1000.0
    while time.monotonic() < until:
        gc.collect()


def log(line):
    print(line, flush=True)


def train(args, shim, rank, world_size):
    elements = args.hidden * args.batch
    stalls_here = args.stall_rank == rank
    loader = Dataloader(args.steps, elements, args.dataloader_ms,
                        args.stall_at_step if stalls_here and args.stall_kind == "dataloader" else -1)
    loader.start()
    start = time.monotonic()
    for step in range(args.steps):
        got_step, batch = loader.batches.get()
        assert got_step == step, f"dataloader gave step {got_step}, expected {step}"
        if args.gc_pause_ms and args.gc_rank in (None, rank) and (step + 1) % args.gc_every == 0:
            gc_pause(args.gc_pause_ms)

        buf = (ctypes.c_float * elements).from_buffer(batch)
        shim.shim_forward_backward(ctypes.addressof(buf), elements, int(args.sync_every_layer))
        if stalls_here and step == args.stall_at_step:
            if args.stall_kind == "host-loop":
                stall_in_host_loop(step)
            if args.stall_kind == "sleep":
                stall_in_sleep(step)
        if args.mismatch_rank == rank and args.mismatch_at_step == step:
            shim.shim_allgather(step)
        else:
            shim.shim_allreduce_grads(step)
        shim.shim_optimizer_step()
        shim.shim_sync()

        index, expected, got = ctypes.c_size_t(), ctypes.c_float(), ctypes.c_float()
        if shim.shim_verify(step, ctypes.byref(index), ctypes.byref(expected), ctypes.byref(got)):
            log(f"python_train rank={rank} FAIL step={step} index={index.value} "
                f"expected={expected.value:g} got={got.value:g}")
            shim.shim_abort(3)
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            log(f"python_train rank={rank} step={step} done")
    loader.join()
    return time.monotonic() - start


def main(argv):
    args = parse_args(argv)
    path = shim_path(args)
    if not path.exists():
        sys.exit(f"python_train: shim library {path} not found (build it, or pass --shim / set TRAIN_SHIM)")
    shim = load_shim(path)
    rank = shim.shim_init(args.layers, args.hidden, args.batch, args.grad_mb)
    world_size = shim.shim_world_size()
    for flag, value in (("--stall-rank", args.stall_rank), ("--mismatch-rank", args.mismatch_rank),
                        ("--gc-rank", args.gc_rank)):
        if value is not None and not 0 <= value < world_size:
            if rank == 0:
                print(f"python_train: {flag} {value} is not a rank of this {world_size}-rank job", file=sys.stderr)
            shim.shim_finalize()
            return 2
    log(f"python_train rank={rank} pid={os.getpid()}")
    seconds = train(args, shim, rank, world_size)
    shim.shim_barrier()
    if rank == 0:
        step_ms = seconds * 1000.0 / args.steps if args.steps else 0.0
        log(f"python_train summary ranks={world_size} steps={args.steps} step_ms={step_ms:.2f}")
    log(f"python_train rank={rank} OK steps={args.steps}")
    shim.shim_finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
