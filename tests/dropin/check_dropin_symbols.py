#!/usr/bin/env python3
"""The drop-in folder against the real libraries: the same file names and sonames, and
every function the real library exports is exported by the drop-in under the same
symbol version (nm -D --with-symbol-versions), so a program linked to the real library
binds every reference on simgpu."""
import argparse
import os
import re
import subprocess
import sys

LIBRARIES = ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2"]


def soname(readelf, library):
    out = subprocess.run([readelf, "-d", library], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[(.*)\]", out)
    return m.group(1) if m else None


def exported(nm, library):
    """{name: version} of the defined dynamic symbols ('' when unversioned)."""
    out = subprocess.run([nm, "-D", "--defined-only", "--with-symbol-versions", library], check=True,
                         capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) != 3 or fields[1] == "A":
            continue
        name, _, version = fields[2].partition("@")
        symbols[name] = version.lstrip("@")
    return symbols


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--real-dir", required=True)
    parser.add_argument("--dropin", required=True)
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--readelf", default="readelf")
    args = parser.parse_args()
    problems = []
    for lib in LIBRARIES:
        real, ours = os.path.join(args.real_dir, lib), os.path.join(args.dropin, lib)
        if not os.path.exists(ours):
            problems.append(f"{ours} missing")
            continue
        if soname(args.readelf, real) != soname(args.readelf, ours):
            problems.append(f"{lib}: soname {soname(args.readelf, ours)}, real {soname(args.readelf, real)}")
        real_symbols, our_symbols = exported(args.nm, real), exported(args.nm, ours)
        for name, version in sorted(real_symbols.items()):
            if our_symbols.get(name) != version:
                problems.append(f"{lib}: {name}@{version} exported as {name}@{our_symbols.get(name)}")
        print(f"{lib}: {len(real_symbols)} real functions, all exported with their versions"
              if not any(p.startswith(lib) for p in problems) else f"{lib}: mismatches")
    for problem in problems[:40]:
        print("FAIL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
