#!/usr/bin/env python3
"""What libhangwatch.so costs an unmodified PyTorch job, measured against itself in one run:
examples/torch_ddp/train.py under the real torchrun on simgpu (simgpu-run), N ranks, runs
alternating without and with LD_PRELOAD=libhangwatch.so (collector off, nothing hangs).
Each run's step time is the median of its per-step times after --warmup steps, taken over
every rank; the result is the ratio of the medians of the runs with and without.

  python3 bench/torch_step_bench.py --build build [--pairs 3] [--ranks 4] [--steps 60]
  python3 bench/torch_step_bench.py --build build-gpu --gpu --ranks 4   # on a GPU node (tests/gpu/run.sh)

Needs the pinned torch (scripts/install-deps.sh --torch) and, on simgpu, the build's drop-in
folder. simgpu's GPU time is CPU time on this machine, so there the ratio is what the watchdog
adds to a step whose device work is emulated: an upper bound for a real GPU, whose kernels are
not slowed by the watchdog's host thread. With --gpu the same job runs on the node's GPUs."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STEP = re.compile(r"^torch_ddp rank=(\d+) step=(\d+) done ms=([0-9.]+)", re.M)


def run_job(args, preload, scratch):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update({"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "HANGWATCH_DUMP_DIR": str(scratch / "dumps"),
                "HANGWATCH_JOB_ID": "bench", "HANGWATCH_COLLECT": "0"})
    if preload:
        env["LD_PRELOAD"] = str(args.build / "watchdog" / "libhangwatch.so")
    simgpu = [] if args.gpu else [str(args.build / "simgpu-dropin" / "simgpu-run")]
    cmd = [*simgpu, str(args.venv / "bin" / "torchrun"), "--standalone",
           "--nproc-per-node", str(args.ranks), str(REPO / "examples" / "torch_ddp" / "train.py"),
           "--steps", str(args.steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"torch_step_bench: the job failed ({'with' if preload else 'without'} the preload):\n"
                 f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    times = [float(ms) for rank, step, ms in STEP.findall(done.stdout) if int(step) >= args.warmup]
    if not times:
        sys.exit(f"torch_step_bench: no step times in the job's output:\n{done.stdout[-2000:]}")
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=REPO / "build")
    parser.add_argument("--venv", type=Path, default=Path(os.environ.get(
        "HANGWATCH_TORCH_VENV", Path(os.environ.get("HANGWATCH_DEPS_CACHE", Path.home() / ".cache" / "hangwatch"))
        / "torch-venv")))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--gpu", action="store_true", help="run on the machine's GPUs, not on simgpu")
    args = parser.parse_args()
    args.build = args.build.resolve()
    needs = [args.venv / "bin" / "torchrun", args.build / "watchdog" / "libhangwatch.so"]
    if not args.gpu:
        needs.append(args.build / "simgpu-dropin" / "simgpu-run")
    for need in needs:
        if not need.exists():
            sys.exit(f"torch_step_bench: {need} not found (scripts/install-deps.sh --torch; build the tree)")
    if args.steps <= args.warmup:
        sys.exit("torch_step_bench: --steps must be above --warmup")
    plain, preloaded = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            # Alternate which goes first, so a drift of the machine does not favour one side.
            order = (False, True) if pair % 2 == 0 else (True, False)
            for preload in order:
                ms = run_job(args, preload, Path(tmp))
                (preloaded if preload else plain).append(ms)
                print(f"pair {pair + 1}: {'with   ' if preload else 'without'} the preload: {ms:.1f} ms/step",
                      flush=True)
    without, with_ = statistics.median(plain), statistics.median(preloaded)
    print(f"torch_ddp on {'the GPUs' if args.gpu else 'simgpu'}, {args.ranks} ranks, {args.steps} steps ({args.warmup} warm-up), {args.pairs} pairs: "
          f"median step {without:.1f} ms without, {with_:.1f} ms with libhangwatch.so: ratio {with_ / without:.3f}")


if __name__ == "__main__":
    main()
