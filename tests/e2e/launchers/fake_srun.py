#!/usr/bin/env python3
"""An srun-like launcher for the tests (stdlib only): start -n tasks of one job step with
SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_NODEID set, plus
MASTER_ADDR/MASTER_PORT as an sbatch script sets them up for env:// (no RANK: the tasks take
it from SLURM_PROCID). With --kill-on-bad-exit, a task exiting non-zero makes it SIGCONT and
SIGTERM every other task, then SIGKILL those still alive after --kill-wait seconds (Slurm's
KillWait, 30 by default). Exits with the first non-zero task status, else 0.

    fake_srun.py -n 4 [--kill-on-bad-exit] [--kill-wait S] [--job-id ID] -- program args...
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def log(msg):
    print(f"fake_srun: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", "--ntasks", type=int, required=True)
    ap.add_argument("--kill-on-bad-exit", action="store_true")
    ap.add_argument("--kill-wait", type=float, default=30.0)
    ap.add_argument("--job-id", default="4242")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for task in range(args.ntasks):
        env = dict(os.environ, SLURM_JOB_ID=args.job_id, SLURM_STEP_ID="0", SLURM_PROCID=str(task),
                   SLURM_LOCALID=str(task), SLURM_NTASKS=str(args.ntasks), SLURM_NODEID="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
            env.pop(var, None)
        procs.append(subprocess.Popen(program, env=env))
    first_bad = None
    while any(p.poll() is None for p in procs):
        bad = next((t for t, p in enumerate(procs) if p.poll() not in (None, 0)), None)
        if bad is not None and args.kill_on_bad_exit:
            first_bad = bad
            break
        time.sleep(0.05)
    if first_bad is not None:
        alive = [p for p in procs if p.poll() is None]
        log(f"task {first_bad} exited with {procs[first_bad].returncode}: terminating {len(alive)} task(s)")
        for p in alive:
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + args.kill_wait
        while time.monotonic() < deadline and any(p.poll() is None for p in alive):
            time.sleep(0.05)
        for p in alive:
            if p.poll() is None:
                log(f"task pid {p.pid} still alive after KillWait {args.kill_wait} s: SIGKILL")
                p.kill()
    codes = [p.wait() for p in procs]
    for task, c in enumerate(codes):
        log(f"task {task} " + (f"killed by {signal.Signals(-c).name}" if c < 0 else f"exited with {c}"))
    bad = next((c for c in codes if c != 0), 0)
    sys.exit(bad if bad > 0 else (1 if bad else 0))


if __name__ == "__main__":
    main()
