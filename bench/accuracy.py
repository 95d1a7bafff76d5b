#!/usr/bin/env python3
"""How often the verdict is right (issue 27): a fault campaign anyone can re-run.

Runs N simgpu jobs per fault class, each with randomised parameters (rank count 4-16, which
rank or link, the op index, the node shape: 1 node or 2-4 nodes in UTS namespaces, the
launcher: mpirun, the torchrun-like or the srun-like one, wait or abort mode, the collector
on or off), reports each with `forensics report` as soon as the job has dumped (abort: the
launcher returned; wait: every rank's dumps are done, then the job is killed), and scores it:

    right   confident, and the culprit is the injected one
    hedged  not confident, and the injected culprit is among the suspects
    wrong   anything else (a confident wrong culprit, a culprit left out, no verdict)

A job whose fault never took effect (simgpu says so when the job ends: its op was never
reached, or the collectives from then on used no connection it breaks) was not run: it is
counted apart and another job of the class is drawn in its place. The table splits each
class's outcomes by the collector (on, off) and by where the fault is (a link inside a node,
a link between nodes; a rank fault is neither).

Two slowdown classes (issue 45) run a pipeline job to its end and judge `forensics analyze`:
right when the critical path names the injected rank (or its stage) as the cause of the slow
steps, hedged when it names nothing (a miss), wrong when it names another; on the absorbed
class right only when nothing is named. Beside it, the op-by-op findings of the same analyze
(the baseline) are scored the same way, with precision, recall and F1 per class.

It also records the seconds from the first detection (TRIGGER.json) to the verdict. Every
wrong verdict's job directory and report are kept (--keep-wrong) for diagnosis. Exit 1 when
any verdict is wrong, except in the classes named by --tolerate (known limits).

    python3 bench/accuracy.py --build build --runs 20 --out docs/accuracy-table.md --json acc.json
    python3 bench/accuracy.py --build build --runs 1                       # what CI runs
    python3 bench/accuracy.py --build build --runs 3 --classes dead-link,tree --seed 7
    python3 bench/accuracy.py --list                                        # the classes
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

TIMEOUT_S = 3  # HANGWATCH_TIMEOUT: the collective that does not finish in 3 s is the hang
# NCCL_IB_TIMEOUT: how long IB retries a write to a peer that is gone before it fails,
# (7 + 1) x 4.096 us x 2^14 = 0.5 s. With the defaults (NCCL's 20: 34 s; hangwatch's timeout
# 300 s) the error comes long before the hang is declared. The campaign's hang timeout is 100
# times shorter, and so is this; else no job could show the error before its snapshot.
IB_TIMEOUT = "14"
REDRAWS = 5    # jobs drawn in place of one whose fault never took effect, at most
NEVER_FIRED = "never took effect"  # simgpu's line for a fault that did nothing (simgpu/README.md)
JOB_WAIT_S = 300
NODE_COUNTS = (1, 2, 3, 4)
LAUNCHERS = ("mpirun", "torchrun", "srun")
# srun under Slurm's default KillOnBadExit=0: a task that exits leaves the others running.
# (mpirun and torchrun tear the job down at the first failed rank: no hang to diagnose.)
SRUN_KEEP = "srun-keep"
# --shape and --collector: every job of the run drawn with these (the rest as drawn), e.g. issue
# 43's cases on 8 ranks as 2 nodes x 4 with the collector on and then off.
FORCED = {}


class Case:
    """One job: its shape, what is injected, and the truth the verdict is judged against.
    truth: {"kind": ..., "link": (a, b)} or {"kind": ..., "rank": r}; `alternatives` are
    further truths any of which is as right (two simultaneous faults)."""

    def __init__(self, rng, min_nodes=1, max_nodes=4, program="ring_train", launchers=None, per_node=None):
        # examples/python_train bootstraps through MPI only: its ranks run under mpirun.
        launchers = launchers or (LAUNCHERS if program == "ring_train" else ("mpirun",))
        self.program = program
        shapes = [(n, k) for n in range(4, 17) for k in NODE_COUNTS
                  if min_nodes <= k <= max_nodes and n % k == 0 and n // k >= 1 and per_node in (None, n // k)]
        self.nranks, self.nodes = rng.choice(shapes)
        if "shape" in FORCED and min_nodes <= FORCED["shape"][1] <= max_nodes and per_node in (
                None, FORCED["shape"][0] // FORCED["shape"][1]):
            self.nranks, self.nodes = FORCED["shape"]
        self.launcher = rng.choice(launchers)
        self.mode = rng.choice(("abort", "wait"))
        self.collector = FORCED.get("collector") or rng.choice(("on", "off"))
        self.op = rng.randint(4, 12)
        self.step = rng.randint(3, 6)
        self.faults = []
        self.args = []
        self.env = {"NCCL_ALGO": "Ring"}
        self.truth = None
        self.alternatives = []
        self.dumps_expected = self.nranks  # a rank whose process is gone writes nothing
        self.steps = 60  # the job's length: every fault fires well before its end
        self.gpus_per_process = 1  # nranks counts processes; the report's ranks are their GPUs

    @property
    def job_ranks(self):
        """The job's ranks as the report counts them: its GPUs (DESIGN.md §3)."""
        return self.nranks * self.gpus_per_process

    @property
    def per_node(self):
        return self.nranks // self.nodes

    def ring_link(self, rng, between_nodes=None):
        """A ring link (r -> r+1): between two nodes, inside one, or either."""
        links = [(r, (r + 1) % self.nranks) for r in range(self.nranks)]
        crossing = [(a, b) for a, b in links if a // self.per_node != b // self.per_node]
        inside = [(a, b) for a, b in links if a // self.per_node == b // self.per_node]
        if between_nodes is True or (between_nodes is None and crossing and rng.random() < 0.5):
            return rng.choice(crossing or inside)
        return rng.choice(inside or crossing)

    def where(self):
        """Where the injected fault is: a link "inside" a node or "between" nodes; "rank" for a
        rank's fault (a GPU, a host, a process)."""
        links = [t["link"] for t in [self.truth, *self.alternatives] if "link" in t]
        if not links:
            return "rank"
        if self.nodes == 1:
            return "inside"
        crossing = [a // self.per_node != b // self.per_node for a, b in links]
        return "between" if any(crossing) else "inside"

    def describe(self):
        where = f"{self.nodes} node(s) of {self.per_node}"
        who = (f"{self.nranks} processes of {self.gpus_per_process} GPUs" if self.gpus_per_process > 1
               else f"{self.nranks} ranks")
        return (f"{who} on {where}, {self.launcher}, {self.mode}, collector {self.collector}, "
                f"faults '{';'.join(self.faults)}' args {' '.join(self.args)} "
                f"{' '.join(f'{k}={v}' for k, v in self.env.items())}")


def dead_link(rng, kind="dead-link", **shape):
    c = Case(rng, **shape)
    a, b = c.ring_link(rng)
    c.faults.append(f"{kind}={a}->{b}@op={c.op}")
    c.truth = {"kind": "communication-hang", "link": (a, b)}
    return c


def dead_rank(rng):
    c = Case(rng)
    r = rng.randrange(c.nranks)
    c.faults.append(f"dead-rank={r}@op={c.op}")
    c.truth = {"kind": "communication-hang", "rank": r}
    return c


def slow_then_dead_link(rng):
    c = dead_link(rng)
    a, b = c.truth["link"]
    c.faults.insert(0, f"slow-link={a}->{b}:0.3")
    return c


def host_stuck(rng, program="ring_train", kind="host-loop"):
    c = Case(rng, program=program)
    r = rng.randrange(c.nranks)
    c.args += ["--stall-rank", str(r), "--stall-at-step", str(c.step), "--stall-kind", kind]
    c.truth = {"kind": "non-communication-hang", "rank": r}
    return c


def mismatch(rng):
    c = Case(rng)
    r = rng.randrange(c.nranks)
    c.args += ["--mismatch-rank", str(r), "--mismatch-at-step", str(c.step)]
    c.truth = {"kind": "collective-mismatch", "rank": r}
    return c


def rank_exits(rng):
    """A rank's process ends (SIGKILL as the OOM killer does, abort() as a failed assertion, or
    exit(1) from an error path) right after it enqueued a step's gradient AllReduce, under srun
    as Slurm runs it by default: the others wait for it in that collective. Between nodes, over
    IB or sockets."""
    c = Case(rng, launchers=(SRUN_KEEP,))
    r = rng.randrange(c.nranks)
    how = rng.choice(("kill", "abort", "exit"))
    # Between nodes NCCL sees a peer process go only through its network: over sockets its
    # receive reads end-of-file at once; over IB only a write posted to it after it went fails.
    if c.nodes > 1:
        c.env["NCCL_NET"] = rng.choice(("IB", "Socket"))
    c.args += ["--exit-rank", str(r), "--exit-at-step", str(c.step), "--exit-how", how]
    c.truth = {"kind": "communication-hang", "rank": r}
    c.dumps_expected = c.nranks - 1
    return c


def never_joins(rng):
    """A rank gets the world communicator's unique id and never calls ncclCommInitRank (stuck
    in its own code): the others wait in init, no collective ever starts."""
    c = Case(rng)
    r = rng.randrange(c.nranks)
    kind = rng.choice(("host-loop", "sleep"))
    c.args += ["--stall-rank", str(r), "--stall-at-step", "init", "--stall-kind", kind]
    c.truth = {"kind": "non-communication-hang", "rank": r}
    return c


def two_faults(rng):
    """Two dead links at once that share no rank: either is a right culprit. (Two links into
    and out of one rank are that rank's fault in every observable: it neither receives nor
    sends, as when its GPU stops.)"""
    c = dead_link(rng)
    first = c.truth["link"]
    links = [(r, (r + 1) % c.nranks) for r in range(c.nranks)]
    links = [(a, b) for a, b in links if not {a, b} & set(first)]
    a, b = rng.choice(links)
    c.faults.append(f"dead-link={a}->{b}@op={c.op}")
    c.alternatives.append({"kind": "communication-hang", "link": (a, b)})
    return c


def graph_replay(rng):
    c = dead_link(rng)
    c.args += ["--cuda-graph"]
    return c


def nonblocking(rng):
    c = dead_link(rng)
    c.args += ["--nonblocking"]
    return c


def tree(rng):
    """NCCL's tree between 2-4 nodes: the link between two nodes' first ranks (the chain
    heads the trees join), as NCCL's double binary tree uses it."""
    c = Case(rng, min_nodes=2)
    c.env["NCCL_ALGO"] = "allreduce:tree"
    a = c.per_node * rng.randrange(1, c.nodes)
    # In NCCL's trees node 1's head is a child of node 0's (tree 0), and every node's head
    # sends up to its parent: the link from a head up to node 0's head when it is node 1,
    # else the chain inside the node (head -> next rank), which every tree has.
    if a == c.per_node:
        link = (a, 0)
    else:
        link = (a, a + 1) if c.per_node > 1 else (c.per_node, 0)
    c.faults.append(f"dead-link={link[0]}->{link[1]}@op={c.op}")
    c.truth = {"kind": "communication-hang", "link": link}
    return c


def tree_dead_gpu(rng):
    """A GPU that stops inside NCCL's tree AllReduce between 2-4 nodes."""
    c = Case(rng, min_nodes=2)
    c.env["NCCL_ALGO"] = "allreduce:tree"
    r = rng.randrange(c.nranks)
    c.faults.append(f"dead-rank={r}@op={c.op}")
    c.truth = {"kind": "communication-hang", "rank": r}
    return c


def pat(rng):
    """NCCL's PAT: the tensor-parallel AllGather and ReduceScatter with one rank per node (as
    NCCL runs it), 4 ranks on 4 nodes; a dead link of the ReduceScatter's first dimension
    (r -> r+1) or a GPU that stops."""
    c = Case(rng, per_node=1)
    c.env["NCCL_ALGO"] = "allreduce:ring;allgather:pat;reducescatter:pat"
    c.args += ["--tp", str(c.nranks)]
    if rng.random() < 0.5:
        a = rng.randrange(c.nranks)
        link = (a, (a + 1) % c.nranks)
        c.faults.append(f"dead-link={link[0]}->{link[1]}@op={c.op}")
        c.truth = {"kind": "communication-hang", "link": link}
    else:
        r = rng.randrange(c.nranks)
        c.faults.append(f"dead-rank={r}@op={c.op}")
        c.truth = {"kind": "communication-hang", "rank": r}
    return c


def dead_nic(rng):
    """A NIC that stops (simgpu's dead-nic), under a ring link between nodes: the NIC of its
    sender or of its receiver. Rank r's GPU is device r % 8 on its node (ring_train's local
    rank on this one machine), whose NIC is mlx5_<device> (simgpu/README.md)."""
    c = Case(rng, min_nodes=2)
    a, b = c.ring_link(rng, between_nodes=True)
    end = rng.choice((a, b))
    nic = (f"node-{end // c.per_node}", f"mlx5_{end % 8}")
    c.faults.append(f"dead-nic={nic[0]}:{nic[1]}@op={c.op}")
    c.truth = {"kind": "communication-hang", "link": (a, b), "nic": nic}
    return c


def multi_gpu(rng):
    """Processes that drive 2 GPUs each, one communicator rank per GPU: nccl-tests' -t 2 and -g 2
    shapes (examples/device_ring --devices 2 --allreduce, a thread per GPU or one thread and a
    group), 2-4 processes on one node, one AllReduce per step on the ring; a dead link between
    two GPU ranks (inside one process or between two) or a GPU that stops. The truth is in GPU
    ranks, the report's ranks for such jobs (DESIGN.md §3)."""
    c = Case(rng, max_nodes=1, launchers=LAUNCHERS, program="device_ring")
    processes = rng.choice((2, 3, 4))
    c.nranks = c.dumps_expected = processes  # the launcher's ranks: one snapshot each
    c.gpus_per_process = 2
    gpus = c.job_ranks
    c.args += ["--devices", "2", "--allreduce"] + (["--threads"] if rng.random() < 0.5 else [])
    if rng.random() < 0.5:
        a = rng.randrange(gpus)
        link = (a, (a + 1) % gpus)
        c.faults.append(f"dead-link={link[0]}->{link[1]}@op={c.op}")
        c.truth = {"kind": "communication-hang", "link": link}
    else:
        g = rng.randrange(gpus)
        c.faults.append(f"dead-rank={g}@op={c.op}")
        c.truth = {"kind": "communication-hang", "rank": g}
    return c


def tensor_parallel(rng):
    """Tensor-parallel groups of T consecutive ranks (ring_train --tp: each step's AllGather and
    ReduceScatter on the group's communicator, a split of the world, beside the world's
    AllReduce): a link of one group's ring stops. T is a node's ranks, as Megatron places TP
    (2 where a node holds one rank); the link may be the group's wrap-around, which only the
    group's communicator uses."""
    c = Case(rng)
    t = c.per_node if c.per_node > 1 else 2
    c.args += ["--tp", str(t)]
    g, i = rng.randrange(c.nranks // t), rng.randrange(t)
    link = (g * t + i, g * t + (i + 1) % t)
    c.faults.append(f"dead-link={link[0]}->{link[1]}@op={c.op}")
    c.truth = {"kind": "communication-hang", "link": link}
    return c


def socket(rng):
    c = dead_link(rng, min_nodes=2)
    c.env["NCCL_NET"] = "Socket"
    a, b = c.ring_link(rng, between_nodes=True)
    c.faults = [f"dead-link={a}->{b}@op={c.op}"]
    c.truth["link"] = (a, b)
    return c


def pipeline(rng):
    """A TP x PP x DP job (ring_train --pp, Megatron's layout: rank = tp + T * (dp + D * stage))
    of 4-16 ranks on 1 or 2 nodes; its collectives on the ring or on NCCL's own choice (the tree
    between nodes for mid sizes); transfers use no algorithm."""
    shapes = [(t, p, d) for t in (1, 2) for p in (2, 4) for d in (1, 2) if 4 <= t * p * d <= 16]
    t, p, d = rng.choice(shapes)
    c = Case(rng, max_nodes=2, per_node=None)
    c.nranks = t * p * d
    c.nodes = rng.choice([k for k in (1, 2) if c.nranks % k == 0])
    c.args += ["--pp", str(p), "--tp", str(t), "--microbatches", str(rng.choice((4, 8)))]
    c.pipe = (t, p, d)
    c.dumps_expected = c.nranks
    c.env["NCCL_ALGO"] = rng.choice(("Ring", ""))  # the TP and DP collectives: the ring, or NCCL's own choice
    return c


def pp_dead_link(rng):
    """A link between two neighbouring stages stops: activations forward or gradients back."""
    c = pipeline(rng)
    t, p, d = c.pipe
    a = rng.randrange(c.nranks - t * d)  # a rank of any stage but the last
    b = a + t * d                         # its peer in the next stage
    link = (a, b) if rng.random() < 0.5 else (b, a)
    c.faults.append(f"dead-link={link[0]}->{link[1]}@op={c.op}")  # op: the sender's transfer launch
    c.truth = {"kind": "communication-hang", "link": link}
    return c


def pp_stuck_stage(rng):
    c = pipeline(rng)
    r = rng.randrange(c.nranks)
    c.args += ["--stall-rank", str(r), "--stall-at-step", str(c.step), "--stall-kind", "host-loop"]
    c.truth = {"kind": "non-communication-hang", "rank": r}
    return c


def pp_skip(rng):
    """A stage's TP group runs one micro-batch fewer at one step (a schedule off by one); with the
    results unchecked the job runs on out of step and hangs at its end, one transfer short."""
    c = pipeline(rng)
    r = rng.randrange(c.nranks)
    c.args += ["--skip-microbatch-rank", str(r), "--skip-at-step", str(c.step), "--no-verify"]
    c.steps = c.step + 3  # out of step it may only hang at the job's end: no longer than needed
    # Its whole TP group skips (one schedule): any of its ranks named is the culprit, as a transfer
    # mismatch (the ranks wait out of step) or, where the group finished and idles, as ranks that
    # never posted what their peers wait for.
    t = c.pipe[0]
    group = range(r - r % t, r - r % t + t)
    truths = [{"kind": k, "rank": g} for g in group for k in ("collective-mismatch", "non-communication-hang")]
    c.truth, c.alternatives = truths[0], truths[1:]
    return c


SLOW_STEPS, SLOW_FROM = 24, 16  # the slowdown from step 16 of 24: the first two thirds are its baseline


def pipeline_slowdown(rng):
    """A TP x PP x DP pipeline with data parallelism (its gradient all-reduce ends each step),
    on simgpu's GPU slowed so that GEMMs take the step, as on a real training job (simgpu's
    transfers cost host CPU, which would otherwise drown the schedule), running to its end."""
    t, p, d = rng.choice([(1, 2, 2), (1, 4, 2), (2, 2, 2)])
    c = Case(rng, max_nodes=2, per_node=None)
    c.nranks = t * p * d
    c.nodes = rng.choice([k for k in (1, 2) if c.nranks % k == 0])
    c.args += ["--pp", str(p), "--tp", str(t), "--microbatches", str(rng.choice((4, 8)))]
    c.pipe = (t, p, d)
    c.steps = SLOW_STEPS
    c.mode, c.collector = "runs", "off"
    c.env["SIMGPU_TFLOPS"] = "0.0005"
    c.slowdown = True
    return c


def pp_slow_critical(rng):
    """A last-stage rank's every forward runs 1-2 more GEMMs from step 16 on (a heavier last
    stage: the LM head). The last stage's forwards and backwards are all on 1F1B's critical path
    (the others' forwards after the first have slack, one backward less one forward, and may
    absorb such work: not a sure truth), so every later step is longer."""
    c = pipeline_slowdown(rng)
    t, p, d = c.pipe
    r = rng.randrange(c.nranks - t * d, c.nranks)  # the last stage
    c.args += ["--extra-work-rank", str(r), "--extra-work-at-step", str(SLOW_FROM), "--extra-work-in", "forward",
               "--extra-work-gemms", str(rng.choice((1, 2)))]
    c.truth = {"kind": "slowdown", "rank": r, "critical": True}
    return c


def pp_slow_absorbed(rng):
    """A last-stage rank runs more GEMMs before its first transfer from step 16 on: less than the
    1F1B warm-up bubble (the P - 1 forwards it waits for anyway), so no step is longer."""
    c = pipeline_slowdown(rng)
    t, p, d = c.pipe
    r = rng.randrange(c.nranks - t * d, c.nranks)  # the last stage
    c.args += ["--extra-work-rank", str(r), "--extra-work-at-step", str(SLOW_FROM), "--extra-work-in", "bubble",
               "--extra-work-gemms", str(1 if p == 2 else 2)]
    c.truth = {"kind": "slowdown", "rank": r, "critical": False}
    return c


CLASSES = {
    "dead-link": (dead_link, "a ring link stops delivering (IB)"),
    "dead-gpu": (dead_rank, "a rank's GPU stops inside a collective"),
    "slow-then-dead-link": (slow_then_dead_link, "a link at 30 % that then stops"),
    "host-stuck": (host_stuck, "a rank's host loops in its own code"),
    "py-dataloader": (lambda rng: host_stuck(rng, "python_train", "dataloader"),
                      "a Python rank's dataloader deadlocks"),
    "mismatch": (mismatch, "a rank calls AllGather where the others call AllReduce"),
    "rank-exits": (rank_exits, "a rank's process ends mid-collective (SIGKILL, abort() or exit(1))"),
    "never-joins": (never_joins, "a rank never calls ncclCommInitRank: the communicator never forms"),
    "two-faults": (two_faults, "two links die at the same op"),
    "graph-replay": (graph_replay, "a dead link inside a CUDA-graph replay"),
    "nonblocking": (nonblocking, "a dead link under non-blocking communicators"),
    "lost-credit": (lambda rng: dead_link(rng, "lost-credit"), "a receiver's clear-to-send messages are lost"),
    "tp": (tensor_parallel, "a link of a tensor-parallel group's ring stops (a communicator split from the world)"),
    "tree": (tree, "a dead link of NCCL's tree between nodes"),
    "tree-dead-gpu": (tree_dead_gpu, "a GPU that stops inside NCCL's tree between nodes"),
    "pat": (pat, "a dead link or a GPU that stops in NCCL's PAT (one rank per node)"),
    "socket": (socket, "a dead link between nodes over NCCL_NET=Socket"),
    "multi-gpu": (multi_gpu, "processes of 2 GPUs each (nccl-tests -t/-g): a dead link or a GPU that stops"),
    "dead-nic": (dead_nic, "a NIC stops: the ring link between nodes it carries, the NIC named"),
    "pp-dead-link": (pp_dead_link, "pipeline: a link between two stages stops (TP x PP x DP, 1F1B)"),
    "pp-stuck-stage": (pp_stuck_stage, "pipeline: a stage's rank loops in host code"),
    "pp-skip": (pp_skip, "pipeline: a stage runs one micro-batch fewer at one step"),
    "pp-slow-critical": (pp_slow_critical, "pipeline: a rank's forwards get slower from a step on (critical path)"),
    "pp-slow-absorbed": (pp_slow_absorbed, "pipeline: a last-stage rank's extra work fits in its 1F1B bubble"),
}


def named_by(ranks_sets, truth, stage_ranks):
    """What a slowdown method said about a job: "rank" (the injected rank, or its stage, among
    what it named), "other" (only other ranks), "nothing"."""
    named = set().union(*ranks_sets) if ranks_sets else set()
    if not named:
        return "nothing"
    return "rank" if truth["rank"] in named and named <= set(stage_ranks) | {truth["rank"]} else \
        ("rank+other" if truth["rank"] in named else "other")


def slowdown_judge(analysis, case):
    """The critical path's call (right / hedged = missed / wrong) and both methods' calls. Right
    on the critical-path class: the injected rank or its stage named as a cause, nothing else;
    on the absorbed class: no cause named at all. The op-by-op baseline's call is what its
    findings name (every finding is a flag)."""
    t, p, d = case.pipe
    r = case.truth["rank"]
    stage = r // (t * d)
    stage_ranks = range(stage * t * d, (stage + 1) * t * d)
    path = analysis.get("critical_path") or {}
    causes = path.get("causes") or []
    cause_sets = [set([c["rank"]] if c.get("rank") is not None else c.get("ranks") or []) for c in causes]
    ours = named_by(cause_sets, case.truth, stage_ranks)
    baseline = named_by([set(f.get("ranks") or []) for f in analysis.get("findings") or []], case.truth, stage_ranks)
    absorbed = [a["rank"] for a in path.get("absorbed") or []]
    said = "; ".join(e for c in causes for e in c.get("evidence", [])[1:2]) or (
        f"absorbed: ranks {absorbed}" if absorbed else "no cause")
    if case.truth["critical"]:
        outcome = {"rank": "right", "nothing": "hedged"}.get(ours, "wrong")
    else:
        outcome = "right" if ours == "nothing" else "wrong"
    return outcome, said[:300], ours, baseline


def keep(root, case, result, output, keep_dir, keep_all):
    """A wrong job's directory (every job's with --keep-all) moved under keep_dir with its case,
    result and output; the rest removed."""
    if (result["outcome"] == "wrong" or keep_all) and keep_dir:
        kept = Path(keep_dir) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{random.randrange(1 << 30)}"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(root), kept)
        (kept / "case.txt").write_text(case.describe() + "\n" + json.dumps(result, indent=1) + "\n")
        (kept / "job-output.txt").write_text(output)
        result["kept"] = str(kept)
    shutil.rmtree(root, True)


def run_slowdown(case, build, keep_dir, keep_all=False):
    """A slowdown job runs to its end; `forensics analyze --format json` is judged."""
    import report_jobs
    from harness import MpiJob

    root = Path(tempfile.mkdtemp(prefix="hangwatch-accuracy-"))
    env = report_jobs.watchdog_env(root, timeout_s=60)
    env.update({"HANGWATCH_METRICS_INTERVAL": "1", "SIMGPU_RANKS_PER_NODE": "", **case.env})
    argv = report_jobs.job_argv(case.program, case.args, case.steps)
    if case.program == "device_ring":  # its processes meet through NCCL's unique id in a file
        argv += ["--id-file", str(root / "nccl.id")]
    if case.nodes > 1:
        env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
        argv = [sys.executable, str(report_jobs.AS_NODE), str(case.per_node), "--", *argv]
    launcher = report_jobs.LAUNCHERS[case.launcher]
    job_dir = root / report_jobs.JOB_ID
    result = {"outcome": "wrong", "why": "", "seconds": None}
    output = ""
    try:
        with MpiJob(case.nranks, argv, env=env, program=case.program,
                    launcher=launcher(case.nranks) if launcher else None) as job:
            code = job.wait_exit(JOB_WAIT_S)
            output = job.output()
        if code != 0:
            result["why"] = f"the job exited {code}: {output[-300:]}"
            return result
        started = time.monotonic()
        done = subprocess.run([str(build / "forensics" / "forensics"), "analyze", "--format", "json", str(job_dir)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            result["why"] = f"forensics analyze exited {done.returncode}: {done.stderr[-300:]}"
            return result
        outcome, why, ours, baseline = slowdown_judge(json.loads(done.stdout), case)
        result = {"outcome": outcome, "why": why, "seconds": round(time.monotonic() - started, 2),
                  "path_call": ours, "baseline_call": baseline}
        return result
    finally:
        keep(root, case, result, output, keep_dir, keep_all)


def scores(results, key, critical):
    """Precision, recall and F1 of one method's calls over a class's jobs: on the critical-path
    class naming the injected rank (or its stage) is a true positive, naming only others a false
    positive and a miss, naming nothing a miss; on the absorbed class anything named is a false
    positive. `critical` None: each result says which class it is from."""
    tp = fp = fn = 0
    for r in results:
        call = r.get(key, "nothing")
        if (r["critical"] if critical is None else critical):
            tp += call in ("rank", "rank+other")
            fp += call in ("other", "rank+other")
            fn += call in ("other", "nothing")
        else:
            fp += call != "nothing"
    return {"tp": tp, "fp": fp, "fn": fn}


def f1_line(name, results, critical):
    out = []
    for key, label in (("path_call", "critical path"), ("baseline_call", "op-by-op findings")):
        s = scores(results, key, critical)
        p = s["tp"] / (s["tp"] + s["fp"]) if s["tp"] + s["fp"] else None
        rec = s["tp"] / (s["tp"] + s["fn"]) if s["tp"] + s["fn"] else None
        f1 = 2 * p * rec / (p + rec) if p and rec else (0.0 if p is not None and rec is not None else None)
        fmt = lambda v: "-" if v is None else f"{v:.2f}"
        out.append(f"{name} {label}: TP {s['tp']} FP {s['fp']} FN {s['fn']} precision {fmt(p)} recall {fmt(rec)} "
                   f"F1 {fmt(f1)}")
    return out


def judge(verdict, case):
    """(right|hedged|wrong, why): verdict_matrix's judge against each truth; a miss is wrong."""
    from verdict_matrix import judge as matrix_judge
    outcomes = [nic_judge(verdict, t, matrix_judge(verdict, t)) for t in [case.truth, *case.alternatives]]
    for wanted in ("right", "hedged"):
        for outcome, why in outcomes:
            if outcome == wanted:
                return outcome, why
    return "wrong", outcomes[0][1]


def nic_judge(verdict, truth, outcome):
    """A dead NIC is right only when the verdict, confident, names that NIC among the NICs of what
    it blames: the link it stopped, or (one rank per node, the NIC carrying both of that rank's
    ring links) that rank. Naming the link or the rank without the NIC (no debugger read the NICs)
    is a hedge."""
    if "nic" not in truth:
        return outcome
    nics = [(n.get("host"), n.get("device")) for n in verdict.get("culprit_link_nics") or []]
    if verdict.get("confident") and tuple(truth["nic"]) in nics:
        return "right", f"names {truth['nic'][0]}'s {truth['nic'][1]} with what it stopped"
    if outcome[0] == "right":
        return "hedged", f"names the link but not the NIC {truth['nic'][1]} (NICs named: {nics or 'none'})"
    ends = set(truth["link"])
    if verdict.get("confident") and set(verdict.get("culprit_ranks") or []) <= ends and verdict.get("culprit_ranks"):
        return "hedged", f"names rank(s) {verdict.get('culprit_ranks')} at the dead NIC, not the NIC"
    return outcome


def never_fired(output):
    """simgpu's lines for the job's faults that never took effect (simgpu/README.md)."""
    return [line.strip() for line in output.splitlines() if line.startswith("simgpu: fault") and NEVER_FIRED in line]


def run(case, build, keep_dir, keep_all=False):
    import report_jobs
    from harness import MpiJob, srun_like

    root = Path(tempfile.mkdtemp(prefix="hangwatch-accuracy-"))
    env = report_jobs.watchdog_env(root, timeout_s=TIMEOUT_S, faults=";".join(case.faults))
    env.update({"HANGWATCH_ON_HANG": case.mode, "HANGWATCH_COLLECT": "1" if case.collector == "on" else "0",
                "SIMGPU_RANKS_PER_NODE": "", "NCCL_PAT_ENABLE": "", "NCCL_IB_TIMEOUT": IB_TIMEOUT, **case.env})
    argv = report_jobs.job_argv(case.program, case.args, case.steps)
    if case.program == "device_ring":  # its processes meet through NCCL's unique id in a file
        argv += ["--id-file", str(root / "nccl.id")]
    if case.nodes > 1:
        env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
        argv = [sys.executable, str(report_jobs.AS_NODE), str(case.per_node), "--", *argv]
    launcher = (lambda n: srun_like(n, kill_on_bad_exit=False)) if case.launcher == SRUN_KEEP \
        else report_jobs.LAUNCHERS[case.launcher]
    job_dir = root / report_jobs.JOB_ID
    result = {"outcome": "wrong", "why": "", "seconds": None}
    output = ""

    def not_run():
        lines = never_fired(output)
        return {"outcome": "not-run", "why": "; ".join(lines)[:500], "seconds": None} if lines else None

    try:
        with MpiJob(case.nranks, argv, env=env, program=case.program,
                    launcher=launcher(case.nranks) if launcher else None) as job:
            if case.mode == "abort":
                if job.wait_exit(JOB_WAIT_S) is None:
                    result["why"] = "the job never aborted"
                    output = job.output()
                    return result
                output = job.output()
                if not_run():
                    result = not_run()
                    return result
            else:
                # The job stays hung: report once every rank has its snapshot, waiting (as an
                # operator's `report --wait` does) for the collectors still running.
                snapshots = lambda: len(list((job_dir / "ranks").glob("r*.watchdog.json")))
                deadline = time.monotonic() + JOB_WAIT_S
                while snapshots() < case.dumps_expected and time.monotonic() < deadline and job.proc.poll() is None:
                    time.sleep(0.2)
                if snapshots() < case.dumps_expected:
                    result["why"] = f"only {snapshots()} of {case.dumps_expected} snapshots"
                    output = job.output()
                    result = not_run() or result
                    return result
            code, out, err = report_jobs.report(job_dir, "json", ("--wait", "0" if case.mode == "abort" else "120"))
            reported = time.time()
            output = job.output()
        if code != 0:
            result["why"] = f"forensics report exited {code}: {err[-300:]}"
            return result
        verdict = json.loads(out)["verdict"]
        trigger = json.loads((job_dir / "TRIGGER.json").read_text()).get("time_unix_s")
        outcome, why = judge(verdict, case)
        result = {"outcome": outcome, "why": why, "seconds": round(reported - trigger, 2) if trigger else None,
                  "headline": verdict.get("headline")}
        result = not_run() or result  # another fault of the job that did nothing: not the job drawn
        return result
    finally:
        keep(root, case, result, output, keep_dir, keep_all)


OUTCOMES = ("right", "hedged", "wrong")


def split(results, key, value):
    picked = [r for r in results if r[key] == value]
    return "/".join(str(sum(r["outcome"] == o for r in picked)) for o in OUTCOMES) if picked else ""


def row(name, results, not_run):
    seconds = [r["seconds"] for r in results if r["seconds"] is not None]
    out = {"class": name, "runs": len(results), "not_run": not_run,
           **{o: sum(r["outcome"] == o for r in results) for o in OUTCOMES},
           "median_s": round(statistics.median(seconds), 2) if seconds else None}
    for key, values in (("collector", ("on", "off")), ("where", ("inside", "between", "rank"))):
        for v in values:
            out[f"{key}_{v}"] = split(results, key, v)
    return out


def table(rows):
    lines = ["| class | runs | right | hedged | wrong | not run | collector on (r/h/w) | collector off | "
             "link inside a node | link between nodes | rank | median s to verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        median = "" if r["median_s"] is None else f"{r['median_s']:.1f}"
        lines.append(f"| {r['class']} | {r['runs']} | {r['right']} | {r['hedged']} | {r['wrong']} | {r['not_run']} | "
                     f"{r['collector_on']} | {r['collector_off']} | {r['where_inside']} | {r['where_between']} | "
                     f"{r['where_rank']} | {median} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build folder (default: build)")
    ap.add_argument("--runs", type=int, default=1, help="jobs per class (default: 1)")
    ap.add_argument("--classes", help="comma-separated classes (default: all; see --list)")
    ap.add_argument("--seed", type=int, help="random seed (default: from the clock; printed)")
    ap.add_argument("--json", help="write the rows (class, runs, right, hedged, wrong, not_run, the splits, median_s) here")
    ap.add_argument("--out", help="write the Markdown table here (it is printed too)")
    ap.add_argument("--keep-wrong", default="accuracy-wrong",
                    help="folder for each wrong verdict's job dir and case (default: ./accuracy-wrong)")
    ap.add_argument("--keep-all", action="store_true",
                    help="keep every job's directory under --keep-wrong, not only the wrong ones")
    ap.add_argument("--tolerate", default="",
                    help="comma-separated classes whose wrong verdicts are known limits (docs/accuracy.md): "
                         "counted and kept, but they do not fail the run")
    ap.add_argument("--shape", help="RANKSxNODES for every job whose class allows it, e.g. 8x2 (default: drawn)")
    ap.add_argument("--collector", choices=("on", "off"), help="the collector of every job (default: drawn)")
    ap.add_argument("--list", action="store_true", help="print the classes and exit")
    args = ap.parse_args()
    if args.shape:
        try:
            ranks, nodes = (int(x) for x in args.shape.lower().split("x"))
        except ValueError:
            ap.error(f"--shape {args.shape}: want RANKSxNODES, e.g. 8x2")
        if not (4 <= ranks <= 16 and nodes in NODE_COUNTS and ranks % nodes == 0):
            ap.error(f"--shape {args.shape}: 4-16 ranks on {NODE_COUNTS} node(s), the same number on each")
        FORCED["shape"] = (ranks, nodes)
    if args.collector:
        FORCED["collector"] = args.collector
    if args.list:
        for name, (_, what) in CLASSES.items():
            print(f"{name:20s} {what}")
        return 0
    names = args.classes.split(",") if args.classes else list(CLASSES)
    tolerated = [n for n in args.tolerate.split(",") if n]
    unknown = [n for n in names + tolerated if n not in CLASSES]
    if unknown:
        ap.error(f"unknown class(es) {', '.join(unknown)}; --list shows them")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    build = Path(args.build).resolve()
    os.environ.setdefault("RING_TRAIN", str(build / "examples" / "ring_train" / "ring_train"))
    os.environ.setdefault("TRAIN_SHIM", str(build / "examples" / "python_train" / "libtrainshim.so"))
    os.environ.setdefault("FORENSICS", str(build / "forensics" / "forensics"))
    for binary in (build / "forensics" / "forensics", build / "watchdog" / "libhangwatch.so",
                   build / "examples" / "ring_train" / "ring_train"):
        if not binary.exists():
            sys.exit(f"accuracy: {binary} is not built")
    import report_jobs
    if not report_jobs.can_run_as_nodes():
        # ctest reads "... skipped" as a skip (tests/e2e/CMakeLists.txt).
        print("accuracy ... skipped: jobs on several nodes need a UTS namespace per rank (root)")
        return 0
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"accuracy: seed {seed}, {args.runs} run(s) per class, classes {', '.join(names)}", flush=True)
    rng = random.Random(seed)
    rows = []
    for name in names:
        make = CLASSES[name][0]
        results, not_run = [], 0
        for i in range(args.runs):
            for _ in range(1 + REDRAWS):
                case = make(rng)
                runner = run_slowdown if getattr(case, "slowdown", False) else run
                r = runner(case, build, args.keep_wrong, args.keep_all)
                if r["outcome"] != "not-run":
                    break
                not_run += 1
                print(f"{name:20s} {i + 1:3d} not run: {r['why']}; drawing another\n{'':25s}{case.describe()}",
                      flush=True)
            r.update({"collector": case.collector, "where": case.where()})
            results.append(r)
            kept = f" (kept in {r['kept']})" if r.get("kept") else ""
            print(f"{name:20s} {i + 1:3d} {r['outcome']:6s} {r['why']}{kept}\n{'':25s}{case.describe()}", flush=True)
        rows.append(row(name, results, not_run))
        if any("path_call" in r for r in results):
            rows[-1]["scores"] = f1_line(name, results, name == "pp-slow-critical")
            rows[-1]["calls"] = [{"path": r.get("path_call"), "baseline": r.get("baseline_call")} for r in results]
    text = table(rows)
    for r in rows:
        for line in r.get("scores", []):
            text += f"\n{line}"
    slow_rows = [r for r in rows if "calls" in r]
    if len(slow_rows) > 1:  # across the slowdown classes: every job's call pooled
        pooled = [{"path_call": c["path"], "baseline_call": c["baseline"], "critical": r["class"] == "pp-slow-critical"}
                  for r in slow_rows for c in r["calls"]]
        for line in f1_line("all slowdown classes", pooled, None):
            text += f"\n{line}"
    text += "\n" if slow_rows else ""
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    failing = [r["class"] for r in rows if r["wrong"] and r["class"] not in tolerated]
    for r in rows:
        if r["wrong"] and r["class"] in tolerated:
            print(f"accuracy: {r['wrong']} wrong in {r['class']}: a known limit (--tolerate), not a failure")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
