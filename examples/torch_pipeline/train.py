#!/usr/bin/env python3
"""torch_pipeline: a small language model split into pipeline stages, one per process, and
trained with PyTorch's own pipeline schedules (torch.distributed.pipelining: PipelineStage,
Schedule1F1B or ScheduleGPipe) on the NCCL backend, launched by torchrun.

  torchrun --nproc-per-node 4 examples/torch_pipeline/train.py --steps 20
  # on simgpu (no GPU):
  <build>/simgpu-dropin/simgpu-run torchrun --nproc-per-node 4 examples/torch_pipeline/train.py

Rank r holds stage r: the first also the embedding, the last also the final LayerNorm, the
vocabulary head and the loss; --layers blocks (LayerNorm -> Linear -> GELU -> Linear with a
residual) per stage. Activations go forward and gradients back with PyTorch's batched
isend/irecv (ncclSend/ncclRecv in a group). After each step the last stage's mean loss is
broadcast to every rank (one world collective per step) and the step is logged:
  torch_pipeline rank=R step=S done ms=T loss=L

Faults a real job has:
  --stall-rank R --stall-at-step S      rank R loops in Python CPU work before step S's schedule
  --slow-rank R --slow-from-step S [--slow-matmuls N]
                                        from step S on, rank R's stage runs N (default 4) more
                                        hidden x hidden matmuls in every forward: a heavier stage
  --exit-rank R --exit-at-step S        rank R's process is killed (SIGKILL, as the OOM killer
                                        does) at the start of step S; the others run on and wait
"""
import argparse
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

PROGRAM = "torch_pipeline"


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=2, help="blocks per stage")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--batch", type=int, default=8, help="sequences per step (split into micro-batches)")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--schedule", choices=("1f1b", "gpipe"), default="1f1b")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--pg-timeout", type=float, default=600.0,
                   help="seconds before PyTorch's own NCCL watchdog declares a collective hung (its default: 600)")
    p.add_argument("--stall-rank", type=int)
    p.add_argument("--stall-at-step", type=int, default=0)
    p.add_argument("--slow-rank", type=int)
    p.add_argument("--slow-from-step", type=int, default=0)
    p.add_argument("--slow-matmuls", type=int, default=4)
    p.add_argument("--exit-rank", type=int)
    p.add_argument("--exit-at-step", type=int, default=0)
    args = p.parse_args(argv)
    if args.batch % args.microbatches:
        p.error(f"--microbatches {args.microbatches} does not divide --batch {args.batch}")
    return args


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Stage(nn.Module):
    """One pipeline stage: token ids in on the first, logits out on the last, hidden states
    between. `extra` hidden x hidden matmuls per forward once `slow` is set (the fault)."""

    def __init__(self, args, index, stages):
        super().__init__()
        self.first, self.last = index == 0, index == stages - 1
        self.embed = nn.Embedding(args.vocab, args.hidden) if self.first else None
        self.blocks = nn.ModuleList(Block(args.hidden) for _ in range(args.layers))
        self.norm = nn.LayerNorm(args.hidden) if self.last else None
        self.head = nn.Linear(args.hidden, args.vocab) if self.last else None
        self.extra = nn.Parameter(torch.eye(args.hidden) / 2, requires_grad=False)
        self.slow_matmuls = 0

    def forward(self, x):
        if self.first:
            x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        for _ in range(self.slow_matmuls):
            x = x + (x @ self.extra) * 0.0
        return self.head(self.norm(x)) if self.last else x


def stuck_in_host_loop():
    # CPU-side work that never ends (a preprocessing loop with a wrong exit condition).
    work = torch.ones(256)
    while True:
        work = (work * 1.0001).clamp_(max=2.0)


def batch_for(step, args, device):
    g = torch.Generator().manual_seed(step * 1009)
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=g).to(device)
    return tokens[:, :-1], tokens[:, 1:]


def log(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def train(args, rank, world, device, module, schedule):
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=args.lr)
    for step in range(args.steps):
        started = time.monotonic()
        if args.stall_rank == rank and args.stall_at_step == step:
            stuck_in_host_loop()
        if args.exit_rank == rank and args.exit_at_step == step:
            log(f"{PROGRAM} rank={rank} killed at step {step}")
            os.kill(os.getpid(), signal.SIGKILL)
        if args.slow_rank == rank and step >= args.slow_from_step:
            module.slow_matmuls = args.slow_matmuls
        inputs, targets = batch_for(step, args, device)
        optimizer.zero_grad(set_to_none=True)
        losses = []
        if module.first:
            schedule.step(inputs)
        elif module.last:
            schedule.step(target=targets, losses=losses)
        else:
            schedule.step()
        optimizer.step()
        loss = torch.stack(losses).mean().reshape(1) if losses else torch.zeros(1, device=device)
        dist.broadcast(loss, src=world - 1)
        torch.cuda.synchronize(device)
        log(f"{PROGRAM} rank={rank} step={step} done ms={(time.monotonic() - started) * 1000:.1f} "
            f"loss={loss.item():.4g}")


def main(argv):
    args = parse_args(argv)
    if "RANK" not in os.environ or "LOCAL_RANK" not in os.environ:
        sys.exit(f"{PROGRAM}: RANK and LOCAL_RANK are not set: start it with torchrun (see --help)")
    rank, world, local_rank = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if world < 2:
        sys.exit(f"{PROGRAM}: a pipeline needs 2 or more ranks (one stage each), not {world}")
    for flag in ("stall", "slow", "exit"):
        value = getattr(args, f"{flag}_rank")
        if value is not None and not 0 <= value < world:
            sys.exit(f"{PROGRAM}: --{flag}-rank {value} is not a rank of this {world}-rank job")
    if not torch.cuda.is_available():
        sys.exit(f"{PROGRAM}: torch {torch.__version__} sees no CUDA device "
                 "(on a machine without a GPU, run it under simgpu-run)")
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device, timeout=timedelta(seconds=args.pg_timeout))
    log(f"{PROGRAM} rank={rank} pid={os.getpid()} device={device} world={world} stage={rank}")
    torch.manual_seed(1234 + rank)
    module = Stage(args, rank, world).to(device)
    # The shapes each stage takes and gives, so that no metadata is exchanged at the first step.
    mb = args.batch // args.microbatches
    hidden = torch.empty(mb, args.seq, args.hidden, device=device)
    inputs = torch.zeros(mb, args.seq, dtype=torch.long, device=device) if module.first else hidden
    outputs = torch.empty(mb, args.seq, args.vocab, device=device) if module.last else hidden
    stage = PipelineStage(module, rank, world, device, input_args=inputs, output_args=outputs,
                          output_grads=None if module.last else torch.empty_like(hidden),
                          input_grads=None if module.first else torch.empty_like(hidden))
    loss_fn = lambda logits, targets: F.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))
    make = Schedule1F1B if args.schedule == "1f1b" else ScheduleGPipe
    schedule = make(stage, n_microbatches=args.microbatches, loss_fn=loss_fn)
    started = time.monotonic()
    train(args, rank, world, device, module, schedule)
    dist.barrier()
    if rank == 0:
        step_ms = (time.monotonic() - started) * 1000.0 / args.steps if args.steps else 0.0
        log(f"{PROGRAM} summary ranks={world} steps={args.steps} step_ms={step_ms:.2f} schedule={args.schedule}")
    log(f"{PROGRAM} rank={rank} OK steps={args.steps}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
