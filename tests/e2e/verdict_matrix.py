#!/usr/bin/env python3
"""The verdict across the shapes NCCL jobs run in (issue 24): 8-rank simgpu jobs with one
injected fault each, over every pair of values of the dimensions below (pairwise, not the
full product), each verdict judged against the fault that was injected:

    right   confident, the right kind and the right culprit (the link, or the rank)
    hedged  not confident, and the culprit is among the suspects
    missed  not confident, and the culprit is not among the suspects
    wrong   confident, and the kind or the culprit is not the injected one

A wrong verdict is the worst outcome: the run fails when any case is wrong or missed.

    python3 tests/e2e/verdict_matrix.py --build build              # every pair, and the edge cases
    python3 tests/e2e/verdict_matrix.py --build build --slice ci   # every value once, and the edge cases
    python3 tests/e2e/verdict_matrix.py --build build --list       # the cases, without running

Dimensions:
    algo       Ring (NCCL_ALGO=Ring), Tree (the AllReduce; NCCL_ALGO=allreduce:tree), PAT (the
               tensor-parallel AllGather and ReduceScatter; NCCL_ALGO=allreduce:ring;allgather:pat;
               reducescatter:pat), where it applies: NCCL runs PAT with one rank per node only
    net        IB (rendezvous), Socket (eager sends)            NCCL_NET
    fault      dead link, lost clear-to-send, GPU that stops, host stall, collective mismatch
    nodes      1 node of 8, 2 nodes of 4, 8 nodes of 1 (UTS namespaces: root)
    comms      one communicator, tensor-parallel groups of 4     ring_train --tp 4
    launch     eager, CUDA-graph replay, non-blocking communicators
    collector  on (debugger phase), off (watchdog snapshots only)
"""
import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DIMENSIONS = {
    "algo": ["Ring", "Tree", "PAT"],
    "net": ["IB", "Socket"],
    "fault": ["dead-link", "lost-credit", "dead-gpu", "host-stall", "mismatch"],
    "nodes": ["1x8", "2x4", "8x1"],
    "comms": ["one", "tp4"],
    "launch": ["eager", "graph", "nonblocking"],
    "collector": ["on", "off"],
}
NRANKS = 8
FAULT_OP = 8
HOST_STEP = 4
NCCL_ALGO = {"Ring": "Ring", "Tree": "allreduce:tree", "PAT": "allreduce:ring;allgather:pat;reducescatter:pat"}
RANKS_PER_NODE = {"1x8": None, "2x4": 4, "8x1": 1}


def applies(case):
    """Whether the case can run as NCCL runs: PAT needs one rank per node, and collectives
    it runs (AllGather and ReduceScatter: the tensor-parallel groups')."""
    return case["algo"] != "PAT" or (case["nodes"] == "8x1" and case["comms"] == "tp4")


def pairwise_cases():
    """A greedy all-pairs cover of DIMENSIONS over the cases that apply, deterministic: each
    new case is the one (of the full product) that covers the most pairs not yet covered,
    the first in product order on a tie. A pair no applicable case holds (PAT on one node)
    is not sought."""
    names = list(DIMENSIONS)
    product = [values for values in itertools.product(*(DIMENSIONS[n] for n in names))
               if applies(dict(zip(names, values)))]
    uncovered = set()
    for values in product:
        for i, j in itertools.combinations(range(len(names)), 2):
            uncovered.add((i, values[i], j, values[j]))
    cases = []
    while uncovered:
        def gain(values):
            return sum((i, values[i], j, values[j]) in uncovered for i, j in itertools.combinations(range(len(names)), 2))
        best = max(product, key=gain)
        for i, j in itertools.combinations(range(len(names)), 2):
            uncovered.discard((i, best[i], j, best[j]))
        cases.append(dict(zip(names, best)))
    return cases


# Beyond the pairs: where the network's semantics decide the verdict, each fault at the
# receiving end of the link between the two nodes (3 -> 4) or on that link, with the
# collector off so that only NCCL's profiler events speak, on both networks. On sockets a
# sender its receiver holds back sits in SendWait, as on a dead wire.
EDGE_CASES = [
    {"algo": "Ring", "net": net, "fault": fault, "nodes": "2x4", "comms": "one", "launch": "eager", "collector": "off",
     "at": at}
    for net in ("Socket", "IB")
    for fault, at in (("dead-link", (3, 4)), ("lost-credit", (3, 4)), ("dead-gpu", 4), ("host-stall", 4))
] + [
    # A tree over two nodes joins them at ranks 0 and 4: rank 4 is a child of 0 in the first
    # tree and the root of the second. A GPU that stops on a leaf of the chain inside a node.
    {"algo": "Tree", "net": net, "fault": fault, "nodes": "2x4", "comms": "one", "launch": "eager",
     "collector": collector, "at": at}
    for net, collector in (("IB", "off"), ("Socket", "on"))
    for fault, at in (("dead-link", (4, 0)), ("lost-credit", (0, 4)), ("dead-gpu", 4), ("dead-gpu", 7))
] + [
    # PAT routes only some blocks over a link: with 2 -> 3 dead only rank 3 stays in the
    # ReduceScatter and the others run on into the next collective, which waits for rank 3.
    {"algo": "PAT", "net": net, "fault": fault, "nodes": "8x1", "comms": "tp4", "launch": launch,
     "collector": collector, "at": at}
    for net, fault, launch, at in (("IB", "dead-link", "graph", (2, 3)), ("Socket", "dead-gpu", "eager", 3))
    # With the debugger phase too: it reads PAT's own peers, per dimension.
    for collector in ("off", "on")
]


def ci_slice(cases):
    """The fewest cases of `cases`, in order, that between them hold every value once."""
    need = {(n, v) for n, vs in DIMENSIONS.items() for v in vs}
    chosen = []
    while need:
        best = max(cases, key=lambda c: sum((n, c[n]) in need for n in DIMENSIONS))
        chosen.append(best)
        need -= {(n, best[n]) for n in DIMENSIONS}
    return chosen


def fault_of(case):
    """(SIMGPU_FAULTS, extra ring_train args, truth) for a case. Truth: the kind, and the
    culprit link (global ranks) or rank. A link fault sits inside a tensor-parallel group
    when there is one (its sender completes the collective and runs ahead, as on NCCL), else
    on a link between nodes when there are two, else inside the node."""
    fault = case["fault"]
    at = case.get("at")
    if fault in ("dead-link", "lost-credit"):
        # Between the nodes the ring crosses at 3 -> 4; the trees join the nodes' first ranks, 0 and 4.
        # Inside a group of 4, 2 -> 3 is a ring link and PAT's ReduceScatter link of distance 1.
        between_nodes = (4, 0) if case["algo"] == "Tree" else (3, 4)
        a, b = at or ((2, 3) if case["comms"] == "tp4" else (between_nodes if case["nodes"] != "1x8" else (5, 6)))
        return f"{fault}={a}->{b}@op={FAULT_OP}", [], {"kind": "communication-hang", "link": (a, b)}
    if fault == "dead-gpu":
        r = 5 if at is None else at
        return f"dead-rank={r}@op={FAULT_OP}", [], {"kind": "communication-hang", "rank": r}
    if fault == "host-stall":
        r = 2 if at is None else at
        args = ["--stall-rank", str(r), "--stall-at-step", str(HOST_STEP), "--stall-kind", "host-loop"]
        return "", args, {"kind": "non-communication-hang", "rank": r}
    r = 6 if at is None else at
    args = ["--mismatch-rank", str(r), "--mismatch-at-step", str(HOST_STEP)]
    return "", args, {"kind": "collective-mismatch", "rank": r}


def judge(verdict, truth):
    """(right|hedged|missed|wrong, why)."""
    confident = bool(verdict.get("confident"))
    link = verdict.get("culprit_link")
    link = (link["from"], link["to"]) if link and verdict.get("culprit_link_ranks") != "communicator" else None
    ranks = set(verdict.get("culprit_ranks") or [])
    if confident:
        if verdict.get("kind") != truth["kind"]:
            return "wrong", f"confident {verdict.get('kind')}, the fault is a {truth['kind']}"
        if "link" in truth:
            if link == truth["link"]:
                return "right", "the link"
            return "wrong", f"confident, names link {link} ranks {sorted(ranks)}, the fault is on {truth['link']}"
        if truth["rank"] in ranks and (link is None or truth["rank"] in link) and len(ranks) <= 2:
            return "right", f"names ranks {sorted(ranks)}"
        return "wrong", f"confident, names ranks {sorted(ranks)} link {link}, the fault is on rank {truth['rank']}"
    # The culprit is among the suspects: the link itself, a link out of its sender or into its
    # receiver whose other end is unknown, or a rank or node holding the rank or a link end.
    # Another link that only shares a rank with the faulty one is not it.
    wanted = set(truth["link"]) if "link" in truth else {truth["rank"]}
    for s in verdict.get("suspects") or []:
        slink = s.get("link")
        if slink:
            ends = (slink["from"], slink["to"])
            a, b = truth.get("link", (None, None))
            if "link" in truth and (ends == (a, b) or ends == (a, None) or ends == (None, b)):
                return "hedged", f"suspects link {ends[0]}->{ends[1]}"
            if "rank" in truth and truth["rank"] in ends:
                return "hedged", f"suspects link {ends[0]}->{ends[1]}, an end of which is rank {truth['rank']}"
        elif wanted & set(s.get("ranks") or []):
            return "hedged", f"suspects ranks {s.get('ranks')}"
    return "missed", f"not confident and the culprit is not among the suspects ({verdict.get('kind')})"


def run_case(case, root, build):
    import report_jobs
    from harness import MpiJob

    faults, extra, truth = fault_of(case)
    env = report_jobs.watchdog_env(root, faults=faults)
    env.update({"HANGWATCH_ON_HANG": "abort", "HANGWATCH_COLLECT": "1" if case["collector"] == "on" else "0",
                "NCCL_NET": case["net"], "NCCL_ALGO": NCCL_ALGO[case["algo"]], "NCCL_PAT_ENABLE": "",
                "SIMGPU_RANKS_PER_NODE": ""})
    args = list(extra)
    if case["comms"] == "tp4":
        args += ["--tp", "4"]
    if case["launch"] == "graph":
        args += ["--cuda-graph"]
    elif case["launch"] == "nonblocking":
        args += ["--nonblocking"]
    argv = report_jobs.job_argv("ring_train", args, 50)
    if RANKS_PER_NODE[case["nodes"]]:
        env["HANGWATCH_E2E_PRELOAD"] = env.pop("LD_PRELOAD")
        argv = [sys.executable, str(report_jobs.AS_NODE), str(RANKS_PER_NODE[case["nodes"]]), "--", *argv]
    started = time.monotonic()
    with MpiJob(NRANKS, argv, env=env, program="ring_train") as job:
        code = job.wait_exit(240)
        output = job.output()
    job_dir = Path(root) / report_jobs.JOB_ID
    if code is None:
        return {"outcome": "missed", "why": "the job never aborted", "output": output[-2000:]}
    code, out, err = report_jobs.report(job_dir, "json", ("--wait", "60" if case["collector"] == "on" else "0"))
    if code != 0:
        return {"outcome": "missed", "why": f"forensics report exited {code}: {err[-500:]}"}
    verdict = json.loads(out)["verdict"]
    outcome, why = judge(verdict, truth)
    return {"outcome": outcome, "why": why, "seconds": round(time.monotonic() - started, 1),
            "verdict": {k: verdict.get(k) for k in ("kind", "confident", "culprit_ranks", "culprit_link",
                                                     "culprit_link_ranks", "source", "headline", "suspects")}}


def label(case):
    at = case.get("at")
    at = "" if at is None else (f" at {at[0]}->{at[1]}" if isinstance(at, tuple) else f" at rank {at}")
    return " ".join(f"{case[n]}" for n in DIMENSIONS) + at


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="the build folder (default: build)")
    parser.add_argument("--slice", choices=["all", "ci"], default="all",
                        help="all: every pair of values; ci: every value once (default: all)")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    parser.add_argument("--only", type=int, action="append", help="run only case N (from --list; repeatable)")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--keep", help="keep each case's dump root as KEEP/case-N (default: removed)")
    parser.add_argument("--retry-missed", action="store_true",
                        help="run a case that was missed once more (a loaded machine's timing); both results are "
                             "printed, a second miss fails; a wrong verdict is never retried")
    args = parser.parse_args()

    cases = pairwise_cases()
    cases = (ci_slice(cases) if args.slice == "ci" else cases) + EDGE_CASES
    numbered = list(enumerate(cases, 1))
    if args.only:
        numbered = [(i, c) for i, c in numbered if i in args.only]
    if args.list:
        print(" #  " + " ".join(DIMENSIONS))
        for i, c in numbered:
            print(f"{i:2d}  {label(c)}")
        return 0

    build = Path(args.build).resolve()
    os.environ.setdefault("RING_TRAIN", str(build / "examples" / "ring_train" / "ring_train"))
    import report_jobs
    if any(RANKS_PER_NODE[c["nodes"]] for _, c in numbered) and not report_jobs.can_run_as_nodes():
        # ctest reads "... skipped" as a skip (tests/e2e/CMakeLists.txt).
        print("verdict_matrix ... skipped: the cases on several nodes need a UTS namespace per rank (root)")
        return 0
    def attempt(i, case, suffix=""):
        root = tempfile.mkdtemp(prefix="hangwatch-verdict-matrix-")
        try:
            return run_case(case, root, build)
        finally:
            if args.keep:
                kept = Path(args.keep) / f"case-{i}{suffix}"
                shutil.rmtree(kept, True)
                shutil.move(root, kept)
            shutil.rmtree(root, True)

    results = []
    for i, case in numbered:
        r = attempt(i, case)
        if r["outcome"] == "missed" and args.retry_missed:
            print(f"{i:2d}  {label(case):60s} missed  {r['why']} (running it again)", flush=True)
            first = r
            r = attempt(i, case, "-again")
            r["first_attempt"] = {k: first.get(k) for k in ("outcome", "why", "verdict")}
        results.append({"case": i, **case, **r})
        print(f"{i:2d}  {label(case):60s} {r['outcome']:7s} {r['why']}", flush=True)
    counts = {o: sum(r["outcome"] == o for r in results) for o in ("right", "hedged", "missed", "wrong")}
    print("verdict_matrix: " + ", ".join(f"{n} {o}" for o, n in counts.items()) + f" of {len(results)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if counts["wrong"] or counts["missed"] else 0


if __name__ == "__main__":
    sys.exit(main())
