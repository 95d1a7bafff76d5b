#!/usr/bin/env python3
"""Runs passthrough_driver on each shim with and without libhangwatch.so preloaded and
fails when the transcripts differ (a return code, errno or CUDA last error the watchdog
changed), or when the preloaded watchdog did not see the simgpu shim's work at all.

  check_passthrough.py --driver D --watchdog LIB --mode local|global NAME=SHIM.so ...
"""
import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile


# "[2026-11-23 15:35:47] host:12525:12525 [0] init.cc:2053 NCCL WARN ..." -> "init.cc:2053 NCCL WARN ..."
NCCL_LINE_PREFIX = re.compile(r"^\[[^]]*\] [^ ]+:\d+:\d+ \[\d+\] ")


def run(driver, shim, mode, preload, dump_dir):
    """(exit code, transcript, stderr, NCCL's WARN lines without time and pid)"""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    nccl_log = os.path.join(dump_dir, f"nccl-{'watched' if preload else 'plain'}.log")
    env.update({"HANGWATCH_DUMP_DIR": dump_dir, "HANGWATCH_JOB_ID": "passthrough", "HANGWATCH_COLLECT": "0",
                "HANGWATCH_METRICS_INTERVAL": "3600", "HANGWATCH_KERNEL_SAMPLE": "1",
                "SIMGPU_DEVICE_COUNT": "2", "NCCL_DEBUG": "WARN", "NCCL_DEBUG_FILE": nccl_log})
    if preload:
        env["LD_PRELOAD"] = preload
    proc = subprocess.run([driver, shim, mode], env=env, capture_output=True, text=True, timeout=90)
    warnings = ""
    if os.path.exists(nccl_log):
        with open(nccl_log) as f:
            warnings = "".join(NCCL_LINE_PREFIX.sub("", line) for line in f if line.strip())
    return proc.returncode, proc.stdout, proc.stderr, warnings


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--driver", required=True)
    parser.add_argument("--watchdog", required=True)
    parser.add_argument("--mode", choices=("local", "global"), required=True)
    parser.add_argument("shims", nargs="+", metavar="NAME=SHIM.so")
    args = parser.parse_args()
    failures = []
    for item in args.shims:
        name, _, shim = item.partition("=")
        with tempfile.TemporaryDirectory(prefix="hangwatch-passthrough-") as dump_dir:
            plain = run(args.driver, shim, args.mode, None, dump_dir)
            watched = run(args.driver, shim, args.mode, args.watchdog, dump_dir)
        print(f"== {name} ({args.mode}) without the watchdog: exit {plain[0]}\n{plain[1]}{plain[2]}{plain[3]}")
        print(f"== {name} ({args.mode}) with the watchdog: exit {watched[0]}\n{watched[2]}")
        if plain[0] != 0 or not plain[1].strip():
            failures.append(f"{name}: the driver itself failed without the watchdog (exit {plain[0]})")
            continue
        if watched[:2] != plain[:2]:
            diff = "".join(difflib.unified_diff(plain[1].splitlines(True), watched[1].splitlines(True),
                                                "without", "with libhangwatch.so"))
            failures.append(f"{name}: the watchdog changed what the caller sees (exit {plain[0]} -> "
                            f"{watched[0]}):\n{diff}")
        # WARN lines NCCL prints because of a call the watchdog made (not the user) show up only here.
        if watched[3] != plain[3]:
            diff = "".join(difflib.unified_diff(plain[3].splitlines(True), watched[3].splitlines(True),
                                                "without", "with libhangwatch.so"))
            failures.append(f"{name}: NCCL logged differently with the watchdog:\n{diff}")
        if name == "sim":
            m = re.search(r"hangwatch_ops_completed=(\d+)", watched[2])
            if not m or int(m.group(1)) == 0:
                failures.append(f"{name}: the preloaded watchdog timed nothing of the shim's work "
                                f"({m.group(0) if m else 'not active'})")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
