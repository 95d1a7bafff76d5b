#!/usr/bin/env python3
"""Runs one rank as if it were on its own machine: `as_node.py N -- argv...` puts the rank
(OMPI_COMM_WORLD_RANK, RANK, SLURM_PROCID) on node `node-<rank // N>` by giving it a UTS
namespace with that hostname, then execs argv in place (same pid). NCCL, simnccl and the
watchdog then see distinct hosts as on a real multi-node job: simnccl groups ranks into
nodes by hostname as NCCL does, and the snapshots name the host. Needs CAP_SYS_ADMIN (root).

The watchdog is preloaded only into the rank: HANGWATCH_E2E_PRELOAD becomes LD_PRELOAD at
the exec, so this wrapper itself never loads it."""
import ctypes
import os
import socket
import sys

CLONE_NEWUTS = 0x04000000


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: as_node.py RANKS_PER_NODE -- PROGRAM [ARGS...]")
    per_node = int(sys.argv[1])
    rank = next((int(os.environ[v]) for v in ("OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID") if v in os.environ), 0)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        sys.exit(f"as_node.py: unshare(CLONE_NEWUTS): {os.strerror(ctypes.get_errno())}")
    socket.sethostname(f"node-{rank // per_node}")
    env = dict(os.environ)
    preload = env.pop("HANGWATCH_E2E_PRELOAD", "")
    if preload:
        env["LD_PRELOAD"] = preload
    os.execvpe(sys.argv[3], sys.argv[3:], env)


if __name__ == "__main__":
    main()
