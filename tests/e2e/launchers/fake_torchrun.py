#!/usr/bin/env python3
"""A torchrun-like launcher for the tests (stdlib only), doing what torch.distributed.run's
local agent does on one node: start --nproc-per-node workers, each in a session of its own,
with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
TORCHELASTIC_RUN_ID set; when a worker fails, SIGTERM every other worker and SIGKILL those
still alive after --kill-grace seconds (torchrun: 30). With --max-restarts N it then starts
all workers again, up to N times, with TORCHELASTIC_RESTART_COUNT counting the restarts and a
new MASTER_PORT, as torchrun's agent does. A SIGTERM to the launcher itself is passed on the
same way. Exits 0 when every worker of the last round did, else 1.

    fake_torchrun.py --nproc-per-node 4 [--kill-grace S] [--run-id ID] [--max-restarts N] -- program args...
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def log(msg):
    print(f"fake_torchrun: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe(code):
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"


def stop_workers(procs, grace):
    alive = [p for p in procs if p.poll() is None]
    log(f"sending SIGTERM to {len(alive)} worker(s)")
    for p in alive:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.poll() is None for p in alive):
        time.sleep(0.05)
    for p in alive:
        if p.poll() is None:
            log(f"worker pid {p.pid} still alive after {grace} s: SIGKILL")
            p.kill()
    for p in procs:
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc-per-node", type=int, required=True)
    ap.add_argument("--kill-grace", type=float, default=30.0)
    ap.add_argument("--run-id", default="fake-torchrun")
    ap.add_argument("--max-restarts", type=int, default=0)
    ap.add_argument("program", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    terminated = []
    signal.signal(signal.SIGTERM, lambda *_: terminated.append(True))
    for restart in range(args.max_restarts + 1):
        if restart:
            log(f"restarting the workers (restart {restart} of {args.max_restarts})")
        ok = run_round(args, program, restart, terminated)
        if ok or terminated:
            break
    sys.exit(0 if ok else 1)


def run_round(args, program, restart, terminated):
    """Starts every worker, waits until all exit or one fails; True when all exited 0."""
    n = args.nproc_per_node
    port = free_port()
    procs = []
    for rank in range(n):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCHELASTIC_RUN_ID=args.run_id,
                   TORCHELASTIC_RESTART_COUNT=str(restart))
        procs.append(subprocess.Popen(program, env=env, start_new_session=True))
    failed = None
    while failed is None and not terminated:
        codes = [p.poll() for p in procs]
        # A failure is one even when every worker exited within the same poll (an aborting
        # job's ranks exit together): torchrun reports it all the same.
        failed = next((r for r, c in enumerate(codes) if c not in (None, 0)), None)
        if failed is None and all(c is not None for c in codes):
            break
        time.sleep(0.05)
    if terminated:
        log("got SIGTERM: stopping the workers")
        stop_workers(procs, args.kill_grace)
    elif failed is not None:
        log(f"worker rank {failed} {describe(procs[failed].returncode)}: stopping the others")
        stop_workers(procs, args.kill_grace)
    for rank, p in enumerate(procs):
        log(f"worker rank {rank} {describe(p.returncode)}")
    return all(p.returncode == 0 for p in procs)


if __name__ == "__main__":
    main()
