#!/usr/bin/env python3
"""Step-time overhead of libhangwatch.so on a PyTorch training loop, measured against
itself in the same run: PAIRS pairs of runs, each pair one run without and one with the
preload (order alternating), STEPS steps each; prints the median ratio.

  torch_overhead.py --watchdog LIB [--steps N] [--pairs P] [--dump-dir DIR] [--sync-every-layer]
  torch_overhead.py --child ...      (one run; used by the parent)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def train(steps, sync_every_layer):
    import torch  # only the child needs it
    torch.manual_seed(0)
    layers = [torch.nn.Linear(2048, 2048) for _ in range(8)]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 2048, device="cuda")
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        h = x
        for layer in layers:
            h = layer(h)
            if sync_every_layer:
                torch.cuda.synchronize()
        loss = h.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[steps // 5:])  # after warm-up


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--watchdog", help="libhangwatch.so")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--dump-dir", default="/tmp/hangwatch-torch")
    p.add_argument("--sync-every-layer", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.steps < 200:
        p.error("--steps must be at least 200")
    if a.child:
        print(f"{train(a.steps, a.sync_every_layer):.9f}")
        return 0
    if not a.watchdog:
        p.error("--watchdog is required")
    ratios = []
    for i in range(a.pairs):
        medians = {}
        for watched in ((False, True) if i % 2 == 0 else (True, False)):
            env = dict(os.environ, HANGWATCH_DUMP_DIR=a.dump_dir, HANGWATCH_JOB_ID=f"torch{i}",
                       HANGWATCH_COLLECT="0")
            env.pop("LD_PRELOAD", None)
            if watched:
                env["LD_PRELOAD"] = a.watchdog
            cmd = [sys.executable, __file__, "--child", "--steps", str(a.steps)]
            if a.sync_every_layer:
                cmd.append("--sync-every-layer")
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
            medians[watched] = float(r.stdout.strip().splitlines()[-1])
        ratios.append(medians[True] / medians[False])
        print(f"pair {i}: {medians[False] * 1e3:.3f} ms plain, {medians[True] * 1e3:.3f} ms watched", file=sys.stderr)
    ratio = statistics.median(ratios)
    print(f"step time with/without the watchdog: {ratio:.4f} ({(ratio - 1) * 100:+.2f} %), "
          f"median of {a.pairs} pairs x {a.steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
