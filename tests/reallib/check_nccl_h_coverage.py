#!/usr/bin/env python3
"""Fails when a function declared in the installed nccl.h (nccl* and the profiling
names pnccl*) has no definition exported by libsimnccl.so: a correct NCCL program
must at least link and load on simgpu.

  check_nccl_h_coverage.py NCCL_H LIBSIMNCCL_SO
"""
import re
import subprocess
import sys

DECLARATION = re.compile(r"^[A-Za-z_][A-Za-z0-9_ *]*[ *](p?nccl[A-Za-z0-9_]+)\s*\(", re.MULTILINE)


def declared(header):
    with open(header) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.DOTALL)  # comments mention calls too
    return sorted(set(DECLARATION.findall(text)))


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    names = declared(sys.argv[1])
    if len(names) < 40:
        print(f"only {len(names)} declarations found in {sys.argv[1]}: is it nccl.h?", file=sys.stderr)
        return 1
    missing = [n for n in names if n not in exported(sys.argv[2])]
    print(f"{len(names) - len(missing)} of {len(names)} nccl.h functions are defined by {sys.argv[2]}")
    for name in missing:
        print(f"MISSING {name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
