#!/usr/bin/env python3
"""Runs an nvcc-built program on simgpu through the drop-in folder (LD_LIBRARY_PATH only),
optionally under libhangwatch.so, and checks what it printed: the loader took every CUDA
and NCCL library from the folder without a warning, the kernels ran as timed device work,
and each call simgpu lacks failed as unsupported with one line naming it."""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

EXPECTED = {
    "devices": "8",
    "driver": "13000",
    "runtime": "13000",
    "cc": "9.0",
    "pci": "0000:1B:00.0",
    "sms": "132",
    "mem_info_ok": "1",
    "kernel_name": "_Z5scalePfif",
    "occupancy_block": "1024",
    "occupancy_min_grid": "264",  # 2 blocks of 1024 threads an SM x 132 SMs
    "cublas_sgemm": "0",
    "cublas_unsupported": "15",  # CUBLAS_STATUS_NOT_SUPPORTED
    "cublaslt_unsupported": "15",
    "driver_primary_active": "1",
    "driver_unsupported": "801",  # CUDA_ERROR_NOT_SUPPORTED
    "nccl_version": "22809",
    "nccl_allreduce": "0",
    "devices_nccl_allreduce": "0",  # one process, two devices, ncclCommInitAll and a grouped AllReduce
    "thread_devices": "0,1",  # a host thread per device
    "cudart_unsupported": "801",  # cudaErrorNotSupported
    "device_variable": "0",  # the device code does not run on simgpu
    "managed_symbol": "1",
}
UNSUPPORTED_LINES = [
    "simgpu: cublasSetVector is not emulated; it returns CUBLAS_STATUS_NOT_SUPPORTED",
    "simgpu: cublasLtMatrixTransformDescCreate is not emulated; it returns CUBLAS_STATUS_NOT_SUPPORTED",
    "simgpu: cuMemCreate is not emulated; it returns CUDA_ERROR_NOT_SUPPORTED",
    "simgpu: cudaArrayGetSparseProperties is not emulated; it returns cudaErrorNotSupported",
]
LIBRARIES = ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2"]


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def base_env(dropin):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = dropin
    return env


def check_resolution(program, dropin):
    env = base_env(dropin)
    env["LD_TRACE_LOADED_OBJECTS"] = "1"
    trace = subprocess.run([program], env=env, capture_output=True, text=True, timeout=30)
    for lib in LIBRARIES:
        m = re.search(rf"^\s*{re.escape(lib)} => (\S+)", trace.stdout, re.M)
        if not m or os.path.dirname(os.path.realpath(m.group(1))) != os.path.realpath(dropin):
            fail(f"{lib} not loaded from {dropin}:\n{trace.stdout}")


def check_watchdog_timed_the_kernels(dumps):
    """The watchdog's timeline (common/include/hangwatch/common/timeline_window.h) holds
    the ten launches of the nvcc kernel under its device name."""
    windows = glob.glob(os.path.join(dumps, "*", "timeline", "r00000.json"))
    if len(windows) != 1:
        fail(f"expected one timeline window under {dumps}, found {windows}")
    with open(windows[0], encoding="utf-8") as f:
        window = json.load(f)
    kernels = [op for op in window["ops"] if op[0] == "kernel" and window["names"][op[1]] == "_Z5scalePfif"]
    if len(kernels) != 10:
        fail(f"the watchdog timed {len(kernels)} launches of _Z5scalePfif, expected 10")
    touches = [op for op in window["ops"] if op[0] == "kernel" and window["names"][op[1]] == "_Z5touchPf"]
    if len(touches) != 6:
        fail(f"the watchdog timed {len(touches)} launches of _Z5touchPf from the two device threads, expected 6")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--program", required=True)
    parser.add_argument("--dropin", required=True)
    parser.add_argument("--watchdog", help="libhangwatch.so to LD_PRELOAD")
    parser.add_argument("--work-dir", required=True)
    args = parser.parse_args()
    args.dropin, args.program = os.path.abspath(args.dropin), os.path.abspath(args.program)
    args.watchdog = args.watchdog and os.path.abspath(args.watchdog)
    check_resolution(args.program, args.dropin)
    env = base_env(args.dropin)
    shutil.rmtree(args.work_dir, ignore_errors=True)  # one run's dumps only
    os.makedirs(args.work_dir)
    if args.watchdog:
        env["LD_PRELOAD"] = args.watchdog
        env["HANGWATCH_DUMP_DIR"] = os.path.join(args.work_dir, "dumps")
        env["HANGWATCH_KERNEL_SAMPLE"] = "1"  # time every launch
        env["RANK"] = "0"  # the watchdog keeps metrics from when it knows the rank: from the start
    run = subprocess.run([args.program], env=env, capture_output=True, text=True, timeout=60, cwd=args.work_dir)
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode != 0:
        fail(f"exit status {run.returncode}")
    values = dict(re.findall(r"(\w+)=(\S+)", run.stdout))
    if "name=NVIDIA H100 80GB HBM3 cc=" not in run.stdout:
        fail("the device is not named as an H100")
    for key, want in EXPECTED.items():
        if values.get(key) != want:
            fail(f"{key}={values.get(key)}, expected {want}")
    # A launch of 4096 blocks of 256 threads: 2 us + 4 waves x 1 us (simgpu/README.md).
    if not float(values.get("kernel_ms", "0")) >= 10 * 0.006:
        fail("ten kernels took less than their modeled time between their events")
    if not float(values.get("graph_ms", "0")) >= 3 * 0.006:
        fail("a graph of three kernels took less than their modeled time")
    stderr_lines = [line for line in run.stderr.splitlines() if line.startswith("simgpu:")]
    if sorted(stderr_lines) != sorted(UNSUPPORTED_LINES):
        fail(f"unsupported-call lines: {stderr_lines}")
    if re.search(r"no version information|version `[^']*' not found|undefined symbol", run.stderr):
        fail("the dynamic loader complained")
    if args.watchdog:
        check_watchdog_timed_the_kernels(os.path.join(args.work_dir, "dumps"))
    print("PASS")


if __name__ == "__main__":
    main()
