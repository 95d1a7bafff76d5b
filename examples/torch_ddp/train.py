#!/usr/bin/env python3
"""torch_ddp: a small transformer-style language model trained with PyTorch's
DistributedDataParallel on the NCCL backend, launched by torchrun, one GPU per process.

  torchrun --nproc-per-node 4 examples/torch_ddp/train.py --steps 50
  # on simgpu (no GPU):
  <build>/simgpu-dropin/simgpu-run torchrun --nproc-per-node 4 examples/torch_ddp/train.py --steps 50

Embedding, --layers blocks of LayerNorm -> Linear -> GELU -> Linear with a residual, a final
LayerNorm and the vocabulary head, cross-entropy, AdamW. With --tp N the blocks' two Linear
layers are split over tensor-parallel groups of N ranks (torch.distributed.new_group): the
first by output columns, the second by input rows, with an explicit all-reduce of the second's
output in each block, as Megatron-LM does; DDP then runs over the data-parallel group of the
ranks that hold the same shard. Every step averages the loss over the data-parallel group for
the log (one more all-reduce) and prints one line with its time:
  torch_ddp rank=R step=S done ms=T loss=L

Host-side faults a real job has (simgpu's SIMGPU_FAULTS covers the device and the network):
  --stall-rank R --stall-at-step S [--stall-kind host-loop|sleep]   rank R never leaves a Python
      function at step S (CPU tensor work in a loop, or a sleep), after its backward pass
  --exit-rank R --exit-at-step S [--exit-how exit|kill|abort]        rank R's process ends right
      after queueing step S's gradient all-reduces
  --mismatch-rank R --mismatch-at-step S [--mismatch-kind extra|size] rank R calls one collective
      more than the others at step S, or reduces a loss of another size
  --never-join-rank R                                                 rank R never joins the
      process group: it loops in Python before init_process_group (a node stuck loading data)
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
from torch.nn.parallel import DistributedDataParallel

PROGRAM = "torch_ddp"


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--batch", type=int, default=4, help="sequences per rank and step")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel group size (divides the world size)")
    p.add_argument("--bucket-mb", type=float, default=0.25, help="DDP's bucket_cap_mb: gradient all-reduce size")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--pg-timeout", type=float, default=600.0,
                   help="seconds before PyTorch's own NCCL watchdog declares a collective hung (its default: 600)")
    p.add_argument("--log-every", type=int, default=1)
    p.add_argument("--stall-rank", type=int)
    p.add_argument("--stall-at-step", type=int)
    p.add_argument("--stall-kind", choices=["host-loop", "sleep"], default="host-loop")
    p.add_argument("--exit-rank", type=int)
    p.add_argument("--exit-at-step", type=int)
    p.add_argument("--exit-how", choices=["exit", "kill", "abort"], default="exit")
    p.add_argument("--mismatch-rank", type=int)
    p.add_argument("--mismatch-at-step", type=int)
    p.add_argument("--mismatch-kind", choices=["extra", "size"], default="extra")
    p.add_argument("--never-join-rank", type=int)
    args = p.parse_args(argv)
    for flag in ("stall", "exit", "mismatch"):
        if getattr(args, f"{flag}_rank") is not None and getattr(args, f"{flag}_at_step") is None:
            p.error(f"--{flag}-rank needs --{flag}-at-step")
    if args.steps < 0 or args.layers < 1 or args.tp < 1 or args.log_every < 1:
        p.error("--steps must be >= 0, --layers, --tp and --log-every >= 1")
    if args.hidden % args.tp or (4 * args.hidden) % args.tp:
        p.error(f"--tp {args.tp} must divide --hidden {args.hidden}")
    return args


class _ReduceInForward(torch.autograd.Function):
    """Megatron's g: the row-parallel layer's partial outputs are summed over the TP group."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _ReduceInBackward(torch.autograd.Function):
    """Megatron's f: the column-parallel layer's input gradient is summed over the TP group."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class Block(nn.Module):
    def __init__(self, hidden, tp, tp_group):
        super().__init__()
        self.tp_group = tp_group if tp > 1 else None
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden // tp)
        self.down = nn.Linear(4 * hidden // tp, hidden, bias=self.tp_group is None)

    def forward(self, x):
        h = self.norm(x)
        if self.tp_group is not None:
            h = _ReduceInBackward.apply(h, self.tp_group)
        h = self.down(F.gelu(self.up(h)))
        if self.tp_group is not None:
            h = _ReduceInForward.apply(h, self.tp_group)
        return x + h


class LanguageModel(nn.Module):
    def __init__(self, args, tp_group):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.hidden)
        self.blocks = nn.ModuleList(Block(args.hidden, args.tp, tp_group) for _ in range(args.layers))
        self.norm = nn.LayerNorm(args.hidden)
        self.head = nn.Linear(args.hidden, args.vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def stuck_in_host_loop(step):
    # CPU-side work that never ends (a preprocessing loop with a wrong exit condition).
    work = torch.ones(256)
    while True:
        work = (work * 1.0001).clamp_(max=2.0)


def stuck_before_joining():
    # Set-up work that never ends before the process group is made (a dataset index build).
    stuck_in_host_loop(-1)


def stuck_in_sleep(step):
    while True:
        time.sleep(3600)


def end_process(how):
    sys.stdout.flush()
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "abort":
        os.abort()
    os._exit(1)


def parallel_groups(rank, world, tp):
    """Ranks r*tp .. r*tp+tp-1 form a TP group; ranks with the same r % tp a DP group.
    Every rank creates every group, in the same order, as new_group requires."""
    tp_group = dp_group = None
    for first in range(0, world, tp):
        members = list(range(first, first + tp))
        group = dist.new_group(members) if tp > 1 else None
        if rank in members:
            tp_group = group
    for shard in range(tp):
        members = list(range(shard, world, tp))
        group = dist.new_group(members) if tp > 1 else None
        if rank in members:
            dp_group = group
    return tp_group, dp_group


def batch_for(step, rank, args, device):
    g = torch.Generator().manual_seed(step * 1009 + rank)
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=g)
    tokens = tokens.to(device, non_blocking=True)
    return tokens[:, :-1], tokens[:, 1:]


def log(line):
    # One write per line: the ranks share torchrun's output.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def train(args, rank, world, device, model, dp_group):
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    dp_size = world // args.tp
    for step in range(args.steps):
        started = time.monotonic()
        inputs, targets = batch_for(step, rank // args.tp if args.tp > 1 else rank, args, device)
        if args.mismatch_rank == rank and args.mismatch_at_step == step and args.mismatch_kind == "extra":
            dist.all_reduce(torch.ones(1, device=device), group=dp_group)
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.exit_rank == rank and args.exit_at_step == step:
            end_process(args.exit_how)
        if args.stall_rank == rank and args.stall_at_step == step:
            (stuck_in_sleep if args.stall_kind == "sleep" else stuck_in_host_loop)(step)
        optimizer.step()
        mean_loss = loss.detach().reshape(1)
        if args.mismatch_rank == rank and args.mismatch_at_step == step and args.mismatch_kind == "size":
            mean_loss = torch.cat([mean_loss, mean_loss])
        dist.all_reduce(mean_loss, group=dp_group)
        mean = mean_loss[0].item() / dp_size
        torch.cuda.synchronize(device)
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            log(f"{PROGRAM} rank={rank} step={step} done ms={(time.monotonic() - started) * 1000:.1f} loss={mean:.4g}")


def main(argv):
    args = parse_args(argv)
    if "RANK" not in os.environ or "LOCAL_RANK" not in os.environ:
        sys.exit(f"{PROGRAM}: RANK and LOCAL_RANK are not set: start it with torchrun (see --help)")
    rank, world, local_rank = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if world % args.tp:
        sys.exit(f"{PROGRAM}: --tp {args.tp} does not divide the world size {world}")
    for flag in ("stall", "exit", "mismatch", "never_join"):
        value = getattr(args, f"{flag}_rank")
        if value is not None and not 0 <= value < world:
            sys.exit(f"{PROGRAM}: --{flag.replace('_', '-')}-rank {value} is not a rank of this {world}-rank job")
    if not torch.cuda.is_available():
        sys.exit(f"{PROGRAM}: torch {torch.__version__} sees no CUDA device "
                 "(on a machine without a GPU, run it under simgpu-run)")
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    if args.never_join_rank == rank:
        stuck_before_joining()
    # device_id: the communicator is made at once, and new_group splits it (ncclCommSplit).
    dist.init_process_group("nccl", device_id=device, timeout=timedelta(seconds=args.pg_timeout))
    log(f"{PROGRAM} rank={rank} pid={os.getpid()} device={device} world={world} tp={args.tp}")
    tp_group, dp_group = parallel_groups(rank, world, args.tp)
    torch.manual_seed(1234 + (rank % args.tp if args.tp > 1 else 0))
    model = LanguageModel(args, tp_group).to(device)
    model = DistributedDataParallel(model, device_ids=[local_rank], process_group=dp_group,
                                    bucket_cap_mb=args.bucket_mb)
    started = time.monotonic()
    train(args, rank, world, device, model, dp_group)
    dist.barrier()
    if rank == 0:
        step_ms = (time.monotonic() - started) * 1000.0 / args.steps if args.steps else 0.0
        log(f"{PROGRAM} summary ranks={world} steps={args.steps} step_ms={step_ms:.2f}")
    log(f"{PROGRAM} rank={rank} OK steps={args.steps}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
