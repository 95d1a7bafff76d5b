#!/usr/bin/env python3
"""The drop-in folder against the real libraries: the same file names and sonames, and
every function the real library exports is exported by the drop-in under the same
symbol version (nm -D --with-symbol-versions), so a program linked to the real library
binds every reference on simgpu. The driver, which no driverless machine has, is checked
against the toolkit's link stub (lib64/stubs/libcuda.so: the same table, no code).

With --torch-venv: every reference PyTorch's libraries (torch/**/*.so) make to a function of
cudart, cuBLAS, cuBLASLt or NCCL, as the wheel's own copies define it, is exported by the
drop-in with that version, so Python's RTLD_NOW import of torch binds on simgpu."""
import argparse
import glob
import os
import re
import subprocess
import sys

LIBRARIES = ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2"]
REAL_PATHS = {"libcuda.so.1": "stubs/libcuda.so"}
# Where the pinned torch's wheels keep the real libraries (scripts/torch-requirements.txt).
TORCH_WHEEL_LIBRARIES = {"libcudart.so.13": "nvidia/cu13/lib", "libcublas.so.13": "nvidia/cu13/lib",
                         "libcublasLt.so.13": "nvidia/cu13/lib", "libnccl.so.2": "nvidia/nccl/lib"}


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
    parser.add_argument("--torch-venv", help="a venv with the pinned torch: check what its libraries reference instead")
    args = parser.parse_args()
    if args.torch_venv:
        return check_torch(args)
    problems = []
    for lib in LIBRARIES + list(REAL_PATHS):
        real, ours = os.path.join(args.real_dir, REAL_PATHS.get(lib, lib)), os.path.join(args.dropin, lib)
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


def undefined(nm, library):
    """{name: version} of what `library` needs from others ('' when unversioned)."""
    out = subprocess.run([nm, "-D", "--undefined-only", "--with-symbol-versions", library], check=True,
                         capture_output=True, text=True).stdout
    wanted = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] in ("U", "w"):
            name, _, version = fields[1].partition("@")
            wanted[name] = version.lstrip("@")
    return wanted


def check_torch(args):
    if not os.path.isdir(args.torch_venv) and not os.environ.get("HANGWATCH_REQUIRE_TORCH"):
        print(f"skipped: no torch venv at {args.torch_venv} (scripts/install-deps.sh --torch makes it)")
        return 0
    site = glob.glob(os.path.join(args.torch_venv, "lib", "python3*", "site-packages"))
    if not site or not os.path.isdir(os.path.join(site[0], "torch")):
        print(f"FAIL: no torch in {args.torch_venv}")
        return 1
    site = site[0]
    libraries = sorted(glob.glob(os.path.join(site, "torch", "**", "*.so*"), recursive=True))
    references = {}
    for library in libraries:
        for name, version in undefined(args.nm, library).items():
            references.setdefault((name, version), os.path.relpath(library, site))
    problems, counted = [], {}
    for lib, folder in TORCH_WHEEL_LIBRARIES.items():
        real = exported(args.nm, os.path.join(site, folder, lib))
        ours = exported(args.nm, os.path.join(args.dropin, lib))
        for (name, version), user in sorted(references.items()):
            if name not in real or (version and version != real[name]):
                continue
            counted[lib] = counted.get(lib, 0) + 1
            if name not in ours or ours[name] != real[name]:
                problems.append(f"{lib}: {user} needs {name}@{version or real[name]}, "
                                f"the drop-in exports {name}@{ours.get(name)}")
        print(f"{lib}: {counted.get(lib, 0)} functions torch's libraries reference"
              + (", all exported" if not any(p.startswith(lib) for p in problems) else ", not all exported"))
    for problem in problems[:40]:
        print("FAIL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
