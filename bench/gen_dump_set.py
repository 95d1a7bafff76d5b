#!/usr/bin/env python3
"""Synthetic hang dump sets for benchmarking `forensics report` at scale.

Writes a job directory laid out as DESIGN.md §4 (TRIGGER.json, ranks/rNNNNN.watchdog.json,
ranks/rNNNNN.forensics.json, ranks/rNNNNN.state.json saying done) for N ranks of a PyTorch-like
job on simgpu, 8 ranks per node, with one injected culprit, in the JSON shape the common/
writers produce (keys sorted, the same indentation). With --forensics, it then merges each
node's files into nodes/<host>.json with that build's `forensics node-summary --all`, as the
node's last collector would have.
Each rank has 16 threads of ~30 frames (simgpu's 6-32 plus --pad-frames): the main thread in the stuck step (Python frames
spliced in), NCCL channel threads, stream threads, autograd, pin-memory and dataloader threads,
MPI progress threads and the watchdog's own threads, plus ring progress per channel.

    bench/gen_dump_set.py OUT --ranks 16384 --fault dead-link=4000->4001 [--forensics build/forensics/forensics]
    bench/gen_dump_set.py OUT --ranks 64 --fault dead-rank=9
    bench/gen_dump_set.py OUT --ranks 64 --fault host-stall=17

Also writes OUT/GENERATED.json saying what was injected, for the benchmark's check.
Ranks are rendered from per-variant text templates (the JSON is built once per distinct
stack set, then only numbers are filled in), so 16,384 ranks take seconds, not minutes."""
import argparse
import hashlib
import json
import multiprocessing
import os
import random
import re
import sys

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
LIBPY = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"
LIBCTYPES = "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so"
LIBFFI = "/usr/lib/x86_64-linux-gnu/libffi.so.8"
SIMCUDA = "/opt/hangwatch/lib/libsimcuda.so"
SIMNCCL = "/opt/hangwatch/lib/libsimnccl.so"
HANGWATCH = "/opt/hangwatch/lib/libhangwatch.so"
SHIM = "/opt/hangwatch/lib/libtrainshim.so"
TORCH = "/opt/torch/lib/libtorch_cpu.so"
MPI_EVENT = "/usr/lib/x86_64-linux-gnu/libevent_core-2.1.so.7"
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
MODULES = [LIBC, LIBPY, LIBCTYPES, LIBFFI, SIMCUDA, SIMNCCL, HANGWATCH, SHIM, TORCH, MPI_EVENT, LIBCUDA]

TRAIN_PY = "/workspace/train/train.py"
SEQ = 1000          # sequence number of the hung collective on the world communicator
BASE_STEP = 96_000  # ring step counters at the start of the hung collective
NCCL_STEPS = 8


def n(function, module, offset, file=None, line=None):
    return ("n", function, module, offset, file, line)


def p(function, file, line):
    return ("p", function, file, line)


THREAD_START = [n("start_thread", LIBC, 0x88fd4), n("__clone3", LIBC, 0x1095fc)]
PY_BOTTOM = [n("PyEval_EvalCode", LIBPY, 0x1f1a3b), n("run_eval_code_obj", LIBPY, 0x22a4f7),
             n("run_mod", LIBPY, 0x22a1c9), n("pyrun_file", LIBPY, 0x23b8e2),
             n("_PyRun_SimpleFileObject", LIBPY, 0x23b34d), n("_PyRun_AnyFileObject", LIBPY, 0x23afd0),
             n("pymain_run_file_obj", LIBPY, 0x24a1e8), n("pymain_run_file", LIBPY, 0x24a0b4),
             n("Py_RunMain", LIBPY, 0x249b12), n("Py_BytesMain", LIBPY, 0x24986a),
             n("__libc_start_call_main", LIBC, 0x2724a), n("__libc_start_main_impl", LIBC, 0x27305),
             n("_start", "/usr/bin/python3.11", 0x5a1)]
TRAIN_OUTER = [p("train", TRAIN_PY, 160), p("main", TRAIN_PY, 201), p("<module>", TRAIN_PY, 215)]


def main_in_sync():
    """Main thread waiting for the step's AllReduce: loss.item() syncs the stream."""
    return [n("__futex_abstimed_wait_common", LIBC, 0x85e16), n("pthread_cond_wait", LIBC, 0x88558),
            n("std::condition_variable::wait(std::unique_lock<std::mutex>&)", SIMCUDA, 0x17943,
              "/usr/include/c++/12/condition_variable", 102),
            n("simgpu::StreamProgress::waitFor(unsigned long)", SIMCUDA, 0x17943, "simgpu/cuda/stream_progress.cc", 20),
            n("simgpu::Milestone::wait() const", SIMCUDA, 0x170bc, "simgpu/cuda/stream_progress.h", 29),
            n("cudaStreamSynchronize", SIMCUDA, 0x170bc, "simgpu/cuda/stream_api.cc", 50),
            n("cudaStreamSynchronize", HANGWATCH, 0x21214, "watchdog/cuda_interposers.cc", 56),
            n("trainshim_item", SHIM, 0x1234, "examples/python_train/trainshim.c", 88),
            n("ffi_call_unix64", LIBFFI, 0x7c0a), n("ffi_call_int", LIBFFI, 0x6a6b),
            n("_call_function_pointer", LIBCTYPES, 0xf6c4), n("_ctypes_callproc", LIBCTYPES, 0xdb1e),
            n("PyCFuncPtr_call", LIBCTYPES, 0xa3f0), n("_PyObject_MakeTpCall", LIBPY, 0x165dd2),
            p("item", "/workspace/train/shim.py", 41), p("step", TRAIN_PY, 123)] + TRAIN_OUTER + PY_BOTTOM


def main_host_stall():
    """The culprit of a non-communication hang: stuck in Python before the collective."""
    return [n("clock_nanosleep@GLIBC_2.2.5", LIBC, 0xd2e95), n("__nanosleep", LIBC, 0xd78b3),
            n("pysleep", LIBPY, 0x2f1e2a), n("time_sleep", LIBPY, 0x2f1c40),
            n("cfunction_vectorcall_O", LIBPY, 0x17a3f5),
            p("wait_for_peer_file", TRAIN_PY, 77), p("maybe_checkpoint", TRAIN_PY, 96),
            p("step", TRAIN_PY, 118)] + TRAIN_OUTER + PY_BOTTOM


def channel_waiting(ch):
    return [n("syscall", LIBC, 0x10a7f9), n("futex", SIMNCCL, 0x2e410, "simgpu/nccl/step_counter.cc", 31),
            n("simnccl::sleepOnCounter(simnccl::StepCounter&, unsigned int, int)", SIMNCCL, 0x2e4b8,
              "simgpu/nccl/step_counter.cc", 58),
            n("simnccl_wait_peer", SIMNCCL, 0x31c02, "simgpu/nccl/ring_channel.cc", 144),
            n("simnccl::StepTransport::awaitStep(simnccl::RecvEnd&)", SIMNCCL, 0x31f88, "simgpu/nccl/ring_channel.cc", 201),
            n("simnccl::StepTransport::recv(simnccl::RecvEnd&)", SIMNCCL, 0x3224a, "simgpu/nccl/ring_channel.cc", 233),
            n("simnccl::CollectiveRunner::allReduce()", SIMNCCL, 0x29c10, "simgpu/nccl/collective_runner.cc", 88),
            n("simnccl::CollectiveRunner::run()", SIMNCCL, 0x29a02, "simgpu/nccl/collective_runner.cc", 41),
            n("simnccl::runCollectiveOnChannel(simnccl::Communicator&, simnccl::Op const&, int)", SIMNCCL, 0x2b7e0,
              "simgpu/nccl/communicator.cc", 310),
            n("simnccl::Communicator::channelMain(int)", SIMNCCL, 0x2b3a4, "simgpu/nccl/communicator.cc", 271),
            n("??", SIMNCCL, 0x2c001)] + THREAD_START


def channel_stalled(ch):
    return [n("clock_nanosleep@GLIBC_2.2.5", LIBC, 0xd2e95), n("__nanosleep", LIBC, 0xd78b3),
            n("simnccl_device_stalled", SIMNCCL, 0x32a10, "simgpu/nccl/ring_channel.cc", 260),
            n("simnccl::CollectiveRunner::allReduce()", SIMNCCL, 0x29c10, "simgpu/nccl/collective_runner.cc", 80),
            n("simnccl::CollectiveRunner::run()", SIMNCCL, 0x29a02, "simgpu/nccl/collective_runner.cc", 41),
            n("simnccl::runCollectiveOnChannel(simnccl::Communicator&, simnccl::Op const&, int)", SIMNCCL, 0x2b7e0,
              "simgpu/nccl/communicator.cc", 310),
            n("simnccl::Communicator::channelMain(int)", SIMNCCL, 0x2b3a4, "simgpu/nccl/communicator.cc", 271),
            n("??", SIMNCCL, 0x2c001)] + THREAD_START


def channel_idle(ch):
    return [n("__futex_abstimed_wait_common", LIBC, 0x85e16), n("pthread_cond_wait", LIBC, 0x88558),
            n("simnccl::Communicator::nextChannelWork(int)", SIMNCCL, 0x2b100, "simgpu/nccl/communicator.cc", 250),
            n("simnccl::Communicator::channelMain(int)", SIMNCCL, 0x2b3a4, "simgpu/nccl/communicator.cc", 266),
            n("??", SIMNCCL, 0x2c001)] + THREAD_START


def stream_thread(busy):
    top = [n("__futex_abstimed_wait_common", LIBC, 0x85e16), n("pthread_cond_wait", LIBC, 0x88558)]
    if busy:
        top += [n("simnccl::Communicator::runCollectives(std::vector<simnccl::Op>)", SIMNCCL, 0x2a6f0,
                  "simgpu/nccl/communicator.cc", 190),
                n("executeKernel", SIMCUDA, 0x1c2e0, "simgpu/cuda/kernel.cc", 44),
                n("std::function<void ()>::operator()() const", SIMCUDA, 0x1c120)]
    return top + [n("simgpu::Stream::run(std::shared_ptr<simgpu::Stream>)", SIMCUDA, 0x1b8a0, "simgpu/cuda/stream.cc", 77),
                  n("std::thread::_State_impl<...>::_M_run()", SIMCUDA, 0x1bb02),
                  n("??", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 0xd44a3)] + THREAD_START


def autograd_thread():
    return [n("__futex_abstimed_wait_common", LIBC, 0x85e16), n("pthread_cond_wait", LIBC, 0x88558),
            n("torch::autograd::ReadyQueue::pop()", TORCH, 0x4a1f0e0),
            n("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", TORCH, 0x4a22a40),
            n("torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)",
              TORCH, 0x4a1c5d2),
            n("torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)",
              TORCH, 0x8c3ab1),
            n("??", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 0xd44a3)] + THREAD_START


PY_THREAD_BOTTOM = [p("run", "/usr/lib/python3.11/threading.py", 975),
                    p("_bootstrap_inner", "/usr/lib/python3.11/threading.py", 1038),
                    p("_bootstrap", "/usr/lib/python3.11/threading.py", 995),
                    n("thread_run", LIBPY, 0x2dd7a1), n("pythread_wrapper", LIBPY, 0x2a3c5e)] + THREAD_START
LOCK_WAIT = [n("__futex_abstimed_wait_common", LIBC, 0x85e16), n("do_futex_wait", LIBC, 0x91a21),
             n("__new_sem_wait_slow64", LIBC, 0x91b3e), n("PyThread_acquire_lock_timed", LIBPY, 0x2a3f12),
             n("acquire_timed", LIBPY, 0x2dcf1e), n("lock_PyThread_acquire_lock", LIBPY, 0x2dd0c4),
             n("method_vectorcall_VARARGS_KEYWORDS", LIBPY, 0x16f2a8),
             p("wait", "/usr/lib/python3.11/threading.py", 324), p("get", "/usr/lib/python3.11/queue.py", 180)]


def pin_memory_thread():
    return LOCK_WAIT + [p("do_one_step", "/opt/torch/utils/data/_utils/pin_memory.py", 31),
                        p("_pin_memory_loop", "/opt/torch/utils/data/_utils/pin_memory.py", 54)] + PY_THREAD_BOTTOM


def worker_thread(busy):
    if busy:
        top = [n("__memmove_avx_unaligned_erms", LIBC, 0x1a1c40), n("bytes_concat", LIBPY, 0x10c2e1),
               p("decode", "/workspace/train/data.py", 61), p("fetch", "/opt/torch/utils/data/_utils/fetch.py", 52)]
    else:
        top = LOCK_WAIT
    return top + [p("_worker_loop", "/workspace/train/data.py", 140)] + PY_THREAD_BOTTOM


def mpi_thread(poll):
    return [n("__poll" if poll else "epoll_wait", LIBC, 0xfa0ef if poll else 0x10b2a6), n("??", MPI_EVENT, 0x2c1e0),
            n("event_base_loop", MPI_EVENT, 0x22b87), n("??", "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40", 0x5e2c1)] \
        + THREAD_START


def hangwatch_thread(which):
    sleep = [n("clock_nanosleep@GLIBC_2.2.5", LIBC, 0xd2e95), n("__nanosleep", LIBC, 0xd78b3),
             n("std::this_thread::sleep_for<long, std::ratio<1l, 1000l> >(...)", HANGWATCH, 0x30ab1)]
    if which == "poll":
        return sleep + [n("hangwatch::watchdog::Watchdog::pollLoop()", HANGWATCH, 0x3a1c0, "watchdog/watchdog.cc", 140),
                        n("??", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 0xd44a3)] + THREAD_START
    return sleep + [n("hangwatch::watchdog::CollectorLauncher::run(hangwatch::watchdog::CollectorRequest const&)",
                      HANGWATCH, 0x3c2d0, "watchdog/collector_launcher.cc", 88),
                    n("hangwatch::watchdog::HangResponder::respond(...)", HANGWATCH, 0x3d0a4, "watchdog/hang_responder.cc", 51),
                    n("??", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 0xd44a3)] + THREAD_START


def cuda_event_thread():
    return [n("__poll", LIBC, 0xfa0ef), n("??", LIBCUDA, 0x2fd8c1), n("??", LIBCUDA, 0x39a1e2),
            n("??", LIBCUDA, 0x2f7a11)] + THREAD_START


def padded(frames, pad):
    # Production stacks are deeper than simgpu's (framework dispatch, std::function and
    # pybind11 trampolines): `pad` such frames go just above the thread's entry point.
    cut = len(frames) - 2
    extra = [n(f"std::_Function_handler<void (), c10::impl::BoxedKernelWrapper<{k}> >::_M_invoke(std::_Any_data const&)",
               TORCH, 0x2000000 + 0x40 * k) for k in range(pad)]
    return frames[:cut] + extra + frames[cut:]


def rank_threads(rank, fault, channels, busy_workers, pad=0):
    """(name, os_name, state, wchan, frames) for every thread of one rank."""
    return [(name, os_name, state, wchan, padded(frames, pad))
            for name, os_name, state, wchan, frames in base_threads(rank, fault, channels, busy_workers)]


def base_threads(rank, fault, channels, busy_workers):
    kind, culprit = fault["kind"], fault.get("rank")
    stalled_host = kind == "host-stall" and rank == culprit
    dead_device = kind == "dead-rank" and rank == culprit
    threads = [("MainThread", "python3", "S", "futex_wait_queue" if not stalled_host else "hrtimer_nanosleep",
                main_host_stall() if stalled_host else main_in_sync())]
    for ch in range(channels):
        frames = channel_idle(ch) if stalled_host else channel_stalled(ch) if dead_device else channel_waiting(ch)
        threads.append((f"simnccl-ch{ch}", f"simnccl-ch{ch}", "S", "futex_wait_queue", frames))
    threads.append(("simgpu-s1", "simgpu-s1", "S", "futex_wait_queue", stream_thread(busy=not stalled_host)))
    threads.append(("simgpu-s2", "simgpu-s2", "S", "futex_wait_queue", stream_thread(busy=False)))
    threads.append(("pt_autograd_0", "pt_autograd_0", "S", "futex_wait_queue", autograd_thread()))
    threads.append(("pin_memory", "python3", "S", "futex_wait_queue", pin_memory_thread()))
    for w in range(2):
        threads.append((f"Thread-{w + 2} (_worker_loop)", "python3", "R" if w in busy_workers else "S",
                        "" if w in busy_workers else "futex_wait_queue", worker_thread(busy=w in busy_workers)))
    threads.append(("python3", "python3", "S", "do_sys_poll", mpi_thread(poll=True)))
    threads.append(("python3", "python3", "S", "ep_poll", mpi_thread(poll=False)))
    threads.append(("cuda-EvtHandlr", "cuda-EvtHandlr", "S", "do_sys_poll", cuda_event_thread()))
    threads.append(("hangwatch-poll", "hangwatch-poll", "S", "hrtimer_nanosleep", hangwatch_thread("poll")))
    threads.append(("hangwatch-dump", "hangwatch-dump", "S", "hrtimer_nanosleep", hangwatch_thread("dump")))
    return threads


class Slot:
    """A number filled in per rank; rendered as a unique string in the prototype JSON."""
    count = 0

    def __init__(self, what):
        self.what = what
        Slot.count += 1
        self.token = f"@@{Slot.count}@@"


def frame_json(frame, slots):
    if frame[0] == "p":
        _, function, file, line = frame
        return {"file": file, "function": function, "kind": "python", "line": line}
    _, function, module, offset, file, line = frame
    slot = Slot(("pc", module, offset))
    slots[slot.token] = slot.what
    j = {"function": function, "kind": "native", "module": module, "offset": offset, "pc": slot.token}
    if file:
        j["file"] = file
        j["line"] = line
    return j


def forensics_template(threads):
    """The rank's forensics JSON as a %-template: numbers that vary per rank are %d."""
    slots = {}
    tjson = []
    for i, (name, os_name, state, wchan, frames) in enumerate(threads):
        tid = Slot(("tid", i))
        slots[tid.token] = tid.what
        t = {"frames": [frame_json(f, slots) for f in frames], "name": name, "os_name": os_name,
             "state": state, "tid": tid.token}
        if wchan:
            t["wchan"] = wchan
        tjson.append(t)
    tokens = {}
    for what in ("pid", "rank", "ring"):
        s = Slot((what,))
        slots[s.token] = s.what
        tokens[what] = s.token
    doc = {"backend": "sim", "backend_requested": "auto",
           "cmdline": ["/usr/bin/python3.11", TRAIN_PY, "--steps", "100000"], "debugger": "/usr/bin/gdb",
           "errors": [], "exe": "/usr/bin/python3.11", "host": "@@host@@",
           "phases": [{"error": None, "name": "proc", "ok": True, "seconds": 0.0012},
                      {"error": None, "name": "attach", "ok": True, "seconds": 0.0091},
                      {"error": None, "name": "unwind", "ok": True, "seconds": 0.21},
                      {"error": None, "name": "python", "ok": True, "seconds": 0.018},
                      {"error": None, "name": "detach", "ok": True, "seconds": 0.0002},
                      {"error": None, "name": "debugger", "ok": True, "seconds": 3.9}],
           "pid": tokens["pid"], "process_state": "S (sleeping)", "python_version": "3.11.2",
           "rank": tokens["rank"], "ring_progress": tokens["ring"], "schema_version": 1,
           "threads": tjson, "time_unix_s": 1795266293.25, "unwinder": "libdwfl"}
    text = json.dumps(doc, indent=1, sort_keys=True).replace("%", "%%")
    order = []

    def sub(m):
        what = slots[m.group(1)]
        order.append(what)
        return "%s" if what[0] in ("ring",) else "%d"

    text = re.sub(r'"(@@\d+@@)"', sub, text)
    return text.replace('"@@host@@"', '"%s"'), order


def module_bases(rank):
    # Each process maps libraries at its own (ASLR) addresses; offsets stay the same.
    bases = {}
    for i, m in enumerate(MODULES + ["/usr/bin/python3.11", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                     "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40"]):
        h = int.from_bytes(hashlib.blake2b(f"{rank}:{m}".encode(), digest_size=4).digest(), "little")
        bases[m] = 0x7f0000000000 + (h << 12)
    return bases


def ring_link_progress(fault, nranks, src):
    """Steps delivered on link src -> src+1 of the world ring when the job stopped."""
    kind, r = fault["kind"], fault.get("rank")
    if kind == "dead-link":
        a = fault["from"]
        return BASE_STEP + (src - a) % nranks  # the dead link least, each hop downstream one more
    # dead-rank and host-stall: nothing goes into or out of the culprit rank.
    if src == r or (src + 1) % nranks == r:
        return BASE_STEP
    return BASE_STEP + (src - r) % nranks + 1


def ring_records(rank, fault, nranks, channels, comm):
    if fault["kind"] == "host-stall" and rank == fault["rank"]:
        return []  # never entered the collective: no ring to read
    prev, nxt = (rank - 1) % nranks, (rank + 1) % nranks
    recv_progress = ring_link_progress(fault, nranks, prev)
    send_progress = ring_link_progress(fault, nranks, rank)
    stalled = fault["kind"] == "dead-rank" and rank == fault["rank"]
    out = []
    for ch in range(channels):
        recv = {"base_step": BASE_STEP, "observed_step": recv_progress, "peer": prev, "posted_step": None,
                "target_step": recv_progress + 1, "waiting": not stalled}
        send = {"base_step": BASE_STEP, "observed_step": send_progress, "peer": nxt,
                "posted_step": send_progress + NCCL_STEPS, "target_step": send_progress + 1, "waiting": False}
        out.append({"algorithm": "RING", "channel": ch, "comm": comm, "comm_rank": rank, "comm_size": nranks,
                    "mismatch": None, "next": nxt, "op": "ncclAllReduce", "prev": prev, "protocol": "SIMPLE",
                    "rank": rank, "recv": recv, "send": send, "seq": SEQ, "source": "sim-frame", "stalled": stalled,
                    "waiting_threads": [] if stalled else [
                        {"direction": "recv", "function": "simnccl_wait_peer", "name": f"simnccl-ch{ch}",
                         "tid": pid_of(rank) + (1 + ch) * 3}]})
    return out


def indent_block(text, depth):
    pad = " " * depth
    return text.replace("\n", "\n" + pad)


def watchdog_json(rank, cfg, fault, comm, tp_comm, trigger):
    nranks = cfg.ranks
    stalled_host = fault["kind"] == "host-stall" and rank == fault["rank"]
    pending = []
    if not stalled_host:
        pending.append({"age_s": 301.5, "bytes": 268435456, "class": "collective", "comm": comm, "count": 67108864,
                        "dtype": "float32", "gpu_started": True, "issued_s_ago": 301.6, "op": "ncclAllReduce",
                        "peer": None, "seq": SEQ})
    pending.append({"age_s": 0.0, "bytes": 4, "class": "memcpy", "comm": "", "count": 0, "dtype": "",
                    "gpu_started": False, "issued_s_ago": 301.5 if not stalled_host else 0.1,
                    "op": "cudaMemcpyAsync", "peer": None, "seq": None})
    doc = {"comms": [{"device": rank % 8, "hash": comm, "last_completed_seq": SEQ - 1,
                      "last_issued_seq": SEQ - 1 if stalled_host else SEQ, "rank": rank, "size": nranks,
                      "state": "live"},
                     {"device": rank % 8, "hash": tp_comm, "last_completed_seq": 4 * SEQ, "last_issued_seq": 4 * SEQ,
                      "rank": rank % 8, "size": 8, "state": "live"}],
           "detected_here": rank == trigger["rank"],
           "health": {"events_exhausted": 0, "failures_logged": 0, "ops_completed": 51234, "ops_dropped": 0,
                      "ops_timed": 51236},
           "host_calls": [],
           "identity": {"cuda_visible_devices": "0,1,2,3,4,5,6,7", "device": rank % 8, "host": host_of(rank),
                        "job_id": cfg.job_id, "local_rank": rank % 8, "pid": pid_of(rank), "rank": rank,
                        "rank_source": "RANK", "world_size": nranks},
           "schema_version": 1,
           "streams": [{"pending": pending, "stream": "0x5100010"}],
           "time_unix_s": trigger["time_unix_s"] + 0.05 + (rank % 97) * 0.001,
           "timeout_s": 300.0, "trigger": trigger}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def state_json(rank, trigger):
    """The state file a rank's collector leaves when it is done (common/rank_state.h)."""
    t = trigger["time_unix_s"] + 4.5 + (rank % 97) * 0.001
    doc = {"collector_pid": 0, "deadline_unix_s": trigger["time_unix_s"] + 95.0, "exited_seen_by": None,
           "forensics": "written", "host": host_of(rank), "note": "", "pid": pid_of(rank), "rank": rank,
           "schema_version": 1, "snapshot": "written", "state": "done", "time_unix_s": t}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def host_of(rank):
    return f"node{rank // 8:05d}"


def pid_of(rank):
    return 40000 + (rank * 7919) % 20000


def parse_fault(text, nranks):
    m = re.fullmatch(r"dead-link=(\d+)->(\d+)", text)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        if b != (a + 1) % nranks:
            sys.exit(f"dead-link {a}->{b}: the ring is in rank order, so B must be A+1 (mod {nranks})")
        return {"kind": "dead-link", "from": a, "to": b}
    m = re.fullmatch(r"(dead-rank|host-stall)=(\d+)", text)
    if m:
        return {"kind": m.group(1), "rank": int(m.group(2))}
    sys.exit(f"unknown fault {text!r}: dead-link=A->B | dead-rank=R | host-stall=R")


class Generator:
    def __init__(self, cfg, fault):
        self.cfg, self.fault = cfg, fault
        self.comm = hashlib.blake2b(cfg.job_id.encode(), digest_size=8).hexdigest()
        self.templates = {}
        first = fault.get("to", fault.get("rank"))
        self.trigger = {"host": host_of(first), "pid": pid_of(first), "rank": first, "reason": "timeout",
                        "schema_version": 1, "time_unix_s": 1795266000.0,
                        "stuck_op": {"age_s": 300.0, "bytes": 268435456, "comm": self.comm, "op": "ncclAllReduce",
                                     "peer": None, "seq": SEQ, "stream": "0x5100010"}}

    def busy_workers(self, rank):
        # A few ranks catch a dataloader worker mid-batch: the noise a real job's stacks have.
        rnd = random.Random(self.cfg.seed * 1_000_003 + rank)
        return tuple(w for w in range(2) if rnd.random() < self.cfg.noise)

    def write_rank(self, rank):
        cfg = self.cfg
        key = (self.fault.get("rank") == rank and self.fault["kind"] in ("dead-rank", "host-stall"),
               self.busy_workers(rank))
        if key not in self.templates:
            self.templates[key] = forensics_template(rank_threads(rank, self.fault, cfg.channels, key[1],
                                                                            cfg.pad_frames))
        template, order = self.templates[key]
        bases = module_bases(rank)
        pid = pid_of(rank)
        rings = ring_records(rank, self.fault, cfg.ranks, cfg.channels, self.comm)
        ring_text = indent_block(json.dumps(rings, indent=1, sort_keys=True), 1)
        values = []
        for what in order:
            k = what[0]
            if k == "pc":
                values.append(bases[what[1]] + what[2])
            elif k == "tid":
                values.append(pid + what[1] * 3)
            elif k == "pid":
                values.append(pid)
            elif k == "rank":
                values.append(rank)
            else:
                values.append(ring_text)
        text = (template.replace('"%s"', '"' + host_of(rank) + '"', 1) % tuple(values)) + "\n"
        ranks_dir = os.path.join(cfg.out, "ranks")
        with open(os.path.join(ranks_dir, f"r{rank:05d}.forensics.json"), "w") as f:
            f.write(text)
        with open(os.path.join(ranks_dir, f"r{rank:05d}.watchdog.json"), "w") as f:
            f.write(watchdog_json(rank, cfg, self.fault, self.comm,
                                  hashlib.blake2b(f"tp{rank // 8}".encode(), digest_size=8).hexdigest(),
                                  self.trigger))
        with open(os.path.join(ranks_dir, f"r{rank:05d}.state.json"), "w") as f:
            f.write(state_json(rank, self.trigger))


GEN = None


def write_ranks(bounds):
    for rank in range(*bounds):
        GEN.write_rank(rank)
    return bounds[1] - bounds[0]


def main():
    global GEN
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="job directory to create")
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--fault", default="dead-link=4000->4001",
                    help="dead-link=A->B (B = A+1) | dead-rank=R | host-stall=R")
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--noise", type=float, default=0.01, help="chance per dataloader worker to be caught busy")
    ap.add_argument("--pad-frames", type=int, default=18,
                    help="extra frames per thread (default 18: ~30 frames a thread, as in production)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--job-id", default="synthetic-job")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--forensics", help="a build's forensics binary: also write the node summaries with it")
    cfg = ap.parse_args()
    fault = parse_fault(cfg.fault, cfg.ranks)
    culprit = fault.get("rank", fault.get("to"))
    if culprit >= cfg.ranks or fault.get("from", 0) >= cfg.ranks:
        sys.exit(f"fault {cfg.fault} names a rank outside 0..{cfg.ranks - 1}")
    os.makedirs(os.path.join(cfg.out, "ranks"), exist_ok=True)
    GEN = Generator(cfg, fault)
    with open(os.path.join(cfg.out, "TRIGGER.json"), "w") as f:
        f.write(json.dumps(GEN.trigger, indent=2, sort_keys=True) + "\n")
    step = 256
    chunks = [(lo, min(lo + step, cfg.ranks)) for lo in range(0, cfg.ranks, step)]
    if cfg.jobs > 1 and len(chunks) > 1:
        with multiprocessing.get_context("fork").Pool(cfg.jobs) as pool:
            sum(pool.imap_unordered(write_ranks, chunks))
    else:
        for c in chunks:
            write_ranks(c)
    expected = {"fault": cfg.fault, "ranks": cfg.ranks, "communicator": GEN.comm, "seq": SEQ}
    if fault["kind"] == "dead-link":
        expected.update(kind="communication-hang", culprit_link={"from": fault["from"], "to": fault["to"]},
                        culprit_ranks=[])
    elif fault["kind"] == "dead-rank":
        expected.update(kind="communication-hang", culprit_link=None, culprit_ranks=[fault["rank"]])
    else:
        expected.update(kind="non-communication-hang", culprit_link=None, culprit_ranks=[fault["rank"]])
    if cfg.forensics:
        import subprocess
        subprocess.run([cfg.forensics, "node-summary", cfg.out, "--all"], check=True, stdout=subprocess.DEVNULL)
        expected["node_summaries"] = len(os.listdir(os.path.join(cfg.out, "nodes")))
    with open(os.path.join(cfg.out, "GENERATED.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(cfg.out)


if __name__ == "__main__":
    main()
