#include "hangwatch/forensics/collector.h"
#include "hangwatch/forensics/flight_recorder_copy.h"
#include "hangwatch/forensics/ras_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/forensics/debugger_session.h"
#include "hangwatch/forensics/probe_request.h"
#include "hangwatch/forensics/python/elf_symbol_table.h"
#include "hangwatch/forensics/proc_snapshot.h"
#include "hangwatch/forensics/ptrace_session.h"
#include "hangwatch/forensics/python_stack_source.h"
#include "hangwatch/forensics/remote_unwinder.h"
#include "hangwatch/forensics/wait_manager.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/rank_state.h"

namespace hangwatch::forensics {
namespace {

class PhaseTimer {
 public:
  PhaseTimer(ForensicsDump& dump, std::string name) : dump_(dump), start_(Clock::now()) {
    dump_.phases.push_back({std::move(name), 0, false, ""});
    index_ = dump_.phases.size() - 1;
  }
  void finish(bool ok, std::string error = "") {
    CollectionPhase& p = dump_.phases[index_];
    p.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    p.ok = ok;
    p.error = std::move(error);
    if (!ok && !p.error.empty() && p.error.rfind("skipped", 0) != 0) dump_.errors.push_back(p.name + ": " + p.error);
  }

 private:
  ForensicsDump& dump_;
  Clock::time_point start_;
  size_t index_ = 0;
};

// Turns a refused attach into a sentence that says whose fault it is.
std::string explainAttachFailure(const std::string& error, const ProcSnapshot& proc) {
  // Read again: a tracer may have come between the /proc pass and our seize.
  auto now = readProcSnapshot(proc.pid);
  pid_t tracer = now && now->tracer_pid != 0 ? now->tracer_pid : proc.tracer_pid;
  if (tracer != 0) {
    ProcThread t = readProcThread(tracer, tracer);
    std::string who = t.comm.empty() ? "" : " (" + t.comm + ")";
    return fmt::format("process {} is already traced by pid {}{}; only one tracer at a time: {}", proc.pid, tracer, who,
                       error);
  }
  if (error.find("Operation not permitted") != std::string::npos) {
    if (proc.uid && *proc.uid != ::geteuid()) {
      return fmt::format("permission denied: process {} belongs to uid {}, the collector runs as uid {}: {}", proc.pid,
                         *proc.uid, ::geteuid(), error);
    }
    return "permission denied by the kernel (ptrace_scope, or a PR_SET_PTRACER the target did not grant): " + error;
  }
  return error;
}

ThreadStack threadFromProc(const ProcThread& t) {
  ThreadStack s;
  s.tid = t.tid;
  s.os_name = t.comm;
  s.name = t.comm;
  s.state = t.state;
  s.wchan = t.wchan;
  return s;
}

// Exited: no /proc entry left, or only the zombie its parent has not reaped yet.
bool processGone(pid_t pid) {
  std::string state = readProcessState(pid);
  return state.empty() || state[0] == 'Z' || state[0] == 'X';
}

// A process killed while we hold it loses its memory map before /proc shows it as a
// zombie, so a read failure can come first: give the exit a moment to show.
bool processGoneSoon(pid_t pid) {
  for (int i = 0; i < 20; ++i) {
    if (processGone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string gone(pid_t pid) {
  return fmt::format("process {} exited during the attach", pid);
}

double wallClockNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string resolveBackend(const std::string& requested, bool maps_simgpu, bool maps_cuda) {
  if (requested != "auto") return requested;
  if (maps_simgpu) return "sim";
  if (maps_cuda) return "cuda";
  return "host";
}

bool mapsSimgpu(const ProcSnapshot& proc) {
  if (proc.mapsObject("libsimnccl") || proc.mapsObject("libsimcuda")) return true;
  static const std::string kMarker = "_ZN6simgpu9simConfigEv";  // simgpu::simConfig(), in its libcudart
  std::set<std::string> seen;
  for (const ProcMapping& m : proc.maps) {
    if (m.path.find("libcudart.so") == std::string::npos || !seen.insert(m.path).second) continue;
    Expected<ElfSymbolTable> t = loadElfSymbols(m.path, {kMarker});
    if (t && t->symbols.count(kMarker)) return true;
  }
  return false;
}

CollectResult Collector::run() {
  CollectResult result;
  ForensicsDump& dump = result.dump;
  const pid_t pid = options_.pid;
  dump.pid = pid;
  dump.rank = options_.rank;
  dump.host = hostName();
  dump.backend_requested = options_.backend;
  dump.time_unix_s = wallClockNow();
  markState(false, "pending", "");

  PhaseTimer proc_phase(dump, "proc");
  Expected<ProcSnapshot> proc = readProcSnapshot(pid);
  if (!proc) {
    proc_phase.finish(false, proc.error());
    result.summary = proc.error();
    markState(true, "failed: " + proc.error(), "");
    return result;  // nothing to write: there is no such process
  }
  dump.exe = proc->exe;
  dump.cmdline = proc->cmdline;
  dump.process_state = proc->state;
  std::map<int64_t, ThreadStack> threads;
  for (const ProcThread& t : proc->threads) threads[t.tid] = threadFromProc(t);
  proc_phase.finish(true, proc->errors.empty() ? "" : "partly readable: " + proc->errors.front());

  std::unique_ptr<RasQuestion> ras = askNcclRas(*proc, dump);
  bool degraded = false;
  const bool stacks_ok = takeStacks(*proc, std::move(threads), result, degraded);
  // The debugger phase only starts after the fast pass has let go.
  readRingProgress(*proc, stacks_ok, degraded, dump);
  if (options_.rank) copyFlightRecorder(pid, options_.out_dir, *options_.rank, dump);
  if (ras) takeRasAnswer(*ras, dump);
  finish(result, stacks_ok, degraded);
  return result;
}

bool Collector::takeStacks(const ProcSnapshot& proc, std::map<int64_t, ThreadStack> threads, CollectResult& result,
                           bool& degraded) {
  ForensicsDump& dump = result.dump;
  const pid_t pid = options_.pid;
  dump.unwinder = "proc-only";
  bool stacks_ok = false;
  if (proc.isZombie()) {
    result.summary = fmt::format(
        "process {} is a zombie: it has exited and its parent has not reaped it; there are no stacks left to take", pid);
    dump.phases.push_back({"attach", 0, false, "skipped: " + result.summary});
    dump.errors.push_back(result.summary);
  } else {
    stacks_ok = fastPass(proc, threads, result, degraded);
  }
  for (auto& [tid, t] : threads) dump.threads.push_back(std::move(t));
  // A process that died while we held it leaves stacks of a corpse: say so instead.
  if (stacks_ok && processGone(pid)) {
    stacks_ok = false;
    result.summary = gone(pid);
    dump.errors.push_back(result.summary);
  }
  if (!stacks_ok && dump.target_exited_during.empty() && processGone(pid)) dump.target_exited_during = "attach";
  return stacks_ok;
}

bool Collector::isNodesFirstRank() const {
  return !options_.rank || options_.node_ranks.empty() ||
         *options_.rank == *std::min_element(options_.node_ranks.begin(), options_.node_ranks.end());
}

// The question goes in before the fast pass (a process whose threads are stopped cannot take
// it) and its answer is gathered on a thread of its own while this collector reads its process:
// RAS waits out its leg timeout (5 s) for any member that does not answer, and members a node
// peer's collector holds stopped are such members. The lowest rank's collector is the one of its
// node that asks (one RAS collective per node, not one per GPU). No NCCL mapped: no RAS to ask.
std::unique_ptr<RasQuestion> Collector::askNcclRas(const ProcSnapshot& proc, ForensicsDump& dump) {
  if (!options_.ask_ras || !(proc.mapsObject("libnccl.so") || proc.mapsObject("libsimnccl"))) return nullptr;
  if (!isNodesFirstRank()) return nullptr;
  Expected<std::string> address = rasAddressOf(readProcEnvironment(options_.pid));
  if (!address) {
    dump.phases.push_back({"ras", 0, false, "skipped: " + address.error()});
    return nullptr;
  }
  return RasQuestion::ask(*address);
}

// Not an error when there is no answer (RAS is evidence, not what the dump promises): the
// phase and `ras.error` say why. Its time is the question's, from asking to the answer.
void Collector::takeRasAnswer(RasQuestion& question, ForensicsDump& dump) {
  dump.ras = question.wait();
  dump.ras->asked_by = "collector";
  dump.phases.push_back({"ras", dump.ras->seconds, dump.ras->error.empty(), dump.ras->error});
}

void Collector::readRingProgress(const ProcSnapshot& proc, bool stacks_ok, bool& degraded, ForensicsDump& dump) {
  dump.backend = resolveBackend(options_.backend, mapsSimgpu(proc),
                                proc.mapsObject("libcuda.so") || proc.mapsObject("libnccl.so"));
  if (dump.backend == "host") {
    dump.phases.push_back({"debugger", 0, false,
                           options_.backend == "host"
                               ? "skipped: backend host"
                               : "skipped: neither simgpu nor NCCL/CUDA is loaded in the process: no ring reader"});
    return;
  }
  if (!stacks_ok) {
    dump.phases.push_back({"debugger", 0, false, "skipped: the fast pass could not attach either"});
    return;
  }
  DebuggerOutcome outcome = debuggerPhase(dump);
  degraded = outcome != DebuggerOutcome::kRead || degraded;
  // Killed under the debugger (a launcher's kill-on-exit): say so plainly, the stacks
  // above were taken from the live process and stay valid.
  if (outcome == DebuggerOutcome::kFailed && processGoneSoon(options_.pid)) {
    dump.target_exited_during = "debugger";
    dump.errors.push_back(fmt::format(
        "process {} exited during the debugger phase: its stacks were taken, its ring progress was not read",
        options_.pid));
  }
}

void Collector::finish(CollectResult& result, bool stacks_ok, bool degraded) {
  const ForensicsDump& dump = result.dump;
  std::string path = options_.rank ? forensicsDumpPath(options_.out_dir, *options_.rank)
                                   : forensicsDumpPathForPid(options_.out_dir, options_.pid);
  Expected<Written> written = writeFileAtomically(path, toJson(dump).dump(1) + "\n");
  if (written) result.dump_path = written->path;
  else result.summary += (result.summary.empty() ? "" : "; ") + written.error();

  if (!stacks_ok) result.exit_code = kCollectFailed;
  else if (degraded || !written) result.exit_code = kCollectDegraded;
  else result.exit_code = kCollectOk;
  if (stacks_ok && result.summary.empty()) {
    result.summary = fmt::format("{} threads{}{}", dump.threads.size(),
                                 dump.python_version.empty() ? "" : ", Python " + dump.python_version,
                                 degraded && !dump.errors.empty() ? "; degraded: " + dump.errors.back() : "");
  }
  std::string outcome = !written ? "failed: " + written.error()
                        : result.exit_code == kCollectOk ? "written"
                        : result.exit_code == kCollectDegraded ? "degraded"
                                                               : "failed: " + result.summary;
  markState(true, outcome,
            dump.target_exited_during.empty() ? "" : "process exited during the " + dump.target_exited_during + " phase");
}

bool Collector::fastPass(const ProcSnapshot& proc, std::map<int64_t, ThreadStack>& threads, CollectResult& result,
                         bool& degraded) {
  ForensicsDump& dump = result.dump;
  const pid_t pid = options_.pid;
  WaitManager waits;
  PtraceSession session(pid, waits);
  Deadline deadline = deadlineIn(options_.timeout_fast_s);

  PhaseTimer attach_phase(dump, "attach");
  Expected<size_t> stopped = session.stopAll(deadline);
  if (!stopped) {
    result.summary = processGoneSoon(pid) ? gone(pid) + " (" + stopped.error() + ")" : explainAttachFailure(stopped.error(), proc);
    attach_phase.finish(false, result.summary);
    return false;
  }
  std::vector<std::string> thread_errors;
  for (const TracedThread& t : session.threads()) {
    if (threads.find(t.tid) == threads.end()) threads.emplace(t.tid, threadFromProc(readProcThread(pid, t.tid)));
    if (t.stopped) continue;
    threads[t.tid].merge_note = "no stack: " + t.error;
    if (!t.exited) thread_errors.push_back(fmt::format("thread {}: {}", t.tid, t.error));
  }
  attach_phase.finish(thread_errors.empty(), thread_errors.empty() ? "" : thread_errors.front());
  if (options_.while_stopped) options_.while_stopped();

  PhaseTimer unwind_phase(dump, "unwind");
  thread_errors.clear();
  auto unwinder = RemoteUnwinder::forStoppedProcess(pid);
  if (!unwinder) {
    result.summary = processGoneSoon(pid) ? gone(pid) : "unwinder: " + unwinder.error();
    unwind_phase.finish(false, result.summary);
    return false;
  }
  dump.unwinder = "libdwfl";
  std::map<int64_t, uint64_t> fs_bases;
  for (const TracedThread& t : session.threads()) {
    if (!t.stopped) continue;
    fs_bases[t.tid] = t.fs_base;
    UnwoundStack stack = (*unwinder)->unwind(t.tid, deadline, options_.max_frames);
    threads[t.tid].native_frames = std::move(stack.frames);
    if (!stack.error.empty()) thread_errors.push_back(fmt::format("thread {}: {}", t.tid, stack.error));
  }
  unwind_phase.finish(thread_errors.empty(), thread_errors.empty() ? "" : thread_errors.front());
  for (size_t i = 1; i < thread_errors.size(); ++i) dump.errors.push_back("unwind: " + thread_errors[i]);

  // Python frames are read while the threads are still stopped: a consistent snapshot.
  PythonStackSource python;
  PhaseTimer python_phase(dump, "python");
  Expected<bool> has_python = python.read(pid);
  if (!has_python) {
    bool reader_missing = !PythonStackSource::available();
    python_phase.finish(false, (reader_missing ? "skipped: " : "") + has_python.error());
    degraded = degraded || !reader_missing;
  } else {
    dump.python_version = python.version();
    python_phase.finish(true, *has_python ? "" : "skipped: no CPython in this process");
  }

  PhaseTimer detach_phase(dump, "detach");
  session.detachAll();
  detach_phase.finish(true);

  for (auto& [tid, t] : threads) {
    t.frames = t.native_frames;
    bool merged = has_python && *has_python && python.mergeInto(t, fs_bases[tid]);
    // native_frames stays only beside a merged stack, for audit; elsewhere it equals frames.
    if (!merged || t.python_frames.empty()) t.native_frames.clear();
    if (merged && !t.merge_note.empty()) dump.errors.push_back(fmt::format("merge of thread {}: {}", tid, t.merge_note));
  }
  if (size_t n = python.unmatchedThreads()) {
    dump.errors.push_back(fmt::format("{} Python thread(s) matched no native thread", n));
  }
  return true;
}

void Collector::markState(bool done, const std::string& forensics, const std::string& note) {
  if (!options_.mark_state || !options_.rank) return;
  std::string path = rankStatePath(options_.out_dir, *options_.rank);
  Expected<RankState> before = readRankState(path);
  RankState s = before ? *before : RankState{};
  double now = wallClockNow();
  s.rank = *options_.rank;
  s.phase = done ? DumpPhase::kDone : DumpPhase::kCollecting;
  s.time_unix_s = now;
  if (s.pid == 0) s.pid = options_.pid;
  if (s.host.empty()) s.host = hostName();
  if (s.deadline_unix_s <= 0) s.deadline_unix_s = now + options_.timeout_fast_s + options_.timeout_debugger_s + 20;
  s.collector_pid = done ? 0 : ::getpid();
  s.forensics = forensics;
  if (!note.empty()) s.note = note;
  (void)writeFileAtomically(path, toJson(s).dump(1) + "\n");
}

Collector::DebuggerOutcome Collector::debuggerPhase(ForensicsDump& dump) {
  PhaseTimer phase(dump, "debugger");
  Expected<DebuggerChoice> debugger =
      DebuggerSession::locateFor(dump.backend, options_.debugger.empty() ? nullptr : options_.debugger.c_str());
  if (!debugger) {
    phase.finish(false, debugger.error());
    return DebuggerOutcome::kFailed;
  }
  dump.debugger = debugger->path;
  // The script is told the backend chosen here, and on cuda where the communicators are.
  std::string snapshot = options_.rank ? watchdogSnapshotPath(options_.out_dir, *options_.rank)
                                       : watchdogSnapshotPathForPid(options_.out_dir, options_.pid);
  ProbeRequest request = makeProbeRequest(dump.backend, debugger->cuda_gdb, snapshot, options_.pid);
  // On simgpu the script reads simgpu's own libraries alone, and loads their symbols itself
  // (gdb-scripts/hangwatch_gdb/sim_ring_reader.py): not every library's at attach.
  std::vector<std::string> before_attach;
  if (dump.backend == "sim") before_attach.push_back("set auto-solib-add off");
  // The debugger's symbol index, kept on the node: the node's first rank may fill it.
  if (std::optional<std::string> cache = DebuggerSession::indexCacheDir(std::getenv("TMPDIR"), isNodesFirstRank()))
    for (std::string& c : DebuggerSession::indexCacheCommands(*cache)) before_attach.push_back(std::move(c));
  WaitManager waits;
  DebuggerSession session(waits);
  auto run = session.run(debugger->path, options_.pid, DebuggerSession::scriptPath("collector_probe.py"),
                         deadlineIn(options_.timeout_debugger_s), {{kProbeEnv, request.toJson().dump()}},
                         before_attach);
  if (!run) {
    phase.finish(false, run.error());
    return DebuggerOutcome::kFailed;
  }
  if (run->timed_out) {
    phase.finish(false, fmt::format("debugger killed after {:g} s (hard time bound){}", options_.timeout_debugger_s,
                                    run->continued_target ? "; target continued from the stop its attach left" : ""));
    return DebuggerOutcome::kFailed;
  }
  if (!run->report) {
    std::string tail = run->output.size() > 300 ? run->output.substr(run->output.size() - 300) : run->output;
    phase.finish(false, fmt::format("debugger exited with code {} without a report: {}", run->exit_code, tail));
    return DebuggerOutcome::kFailed;
  }
  // The debugger script's ring records go into the dump as they are.
  auto rings = run->report->find("ring_progress");
  if (rings != run->report->end() && rings->is_array()) {
    for (const nlohmann::json& r : *rings) {
      Expected<RingProgress> record = ringProgressFromJson(r);
      if (record) dump.ring_progress.push_back(std::move(*record));
      else dump.errors.push_back("debugger: " + record.error());
    }
  }
  // What the script could not read (gdb-scripts/README.md): degraded evidence, said in the dump.
  auto script_errors = run->report->find("errors");
  if (script_errors != run->report->end() && script_errors->is_array()) {
    for (const nlohmann::json& e : *script_errors)
      if (e.is_string()) dump.errors.push_back("debugger: " + e.get<std::string>());
  }
  phase.finish(true);
  if (!debugger->shortfall.empty()) {
    dump.errors.push_back("debugger: " + debugger->shortfall);
    return DebuggerOutcome::kPartly;
  }
  return DebuggerOutcome::kRead;
}

}  // namespace hangwatch::forensics
