#include "hangwatch/watchdog/hang_responder.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/watchdog/declared_hang.h"
#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/term_deferral.h"
#include "hangwatch/watchdog/watchdog_log.h"

namespace hangwatch::watchdog {
namespace {

std::string collectorResult(const Expected<CollectorOutcome>& outcome) {
  if (!outcome) return "not started: " + outcome.error();
  if (!outcome->finished) return "pending";
  switch (outcome->exit_code) {
    case 0: return "written";
    case 3: return "degraded";
    default: return fmt::format("failed: collector exited with {}", outcome->exit_code);
  }
}

void writeStateFile(const HangResponse& r, const RankState& state) {
  std::string text = toJson(state).dump(1) + "\n";
  auto w = r.write_file ? r.write_file(r.state_path, std::move(text)) : writeFileAtomically(r.state_path, text);
  if (!w) WatchdogLog::instance().failureOnce("state-write", "rank state not written: " + w.error());
}

void writeState(const HangResponse& r, RankState state) {
  if (r.state_path.empty()) return;
  state.time_unix_s = wallClockSeconds();
  writeStateFile(r, state);
}

// The launcher's SIGTERM was held as long as it may be and goes on now, with the collector
// still at work: the launcher's SIGKILL will likely end it too. The rank's state says so
// before the process dies, so the report tells why its dump is cut short should the
// collector not finish and mark the rank done itself.
void noteCutShortByTerm(const HangResponse& r, RankState state, const CollectorOutcome& outcome) {
  WatchdogLog::instance().info(fmt::format(
      "SIGTERM held {:.0f} s, the most it may be; the collector (pid {}) still runs and may be cut short", HangResponder::kTermHoldS,
      outcome.pid));
  state.collector_pid = outcome.pid;
  state.note = fmt::format(
      "the launcher's SIGTERM ended the process {:.0f} s after it came (the most hangwatch holds it) while its "
      "collector still ran: the forensics dump is complete only if the collector finished",
      HangResponder::kTermHoldS);
  writeState(r, std::move(state));
}

// With the collector off, NCCL's RAS for this node, asked by `forensics ras` (nothing is stopped:
// members that run answer at once). Bounded; a held SIGTERM cuts the wait as for a collector.
void askNodesRas(RasRequest request, const TermHandling& term) {
  WatchdogLog& log = WatchdogLog::instance();
  request.give_up = [&] { return term.pending_for_s && term.pending_for_s() > HangResponder::kTermHoldS; };
  Expected<CollectorOutcome> outcome = Error{"not started"};
  try {
    outcome = CollectorLauncher().askRas(request);
  } catch (const std::exception& e) {
    outcome = Error{e.what()};
  }
  if (!outcome)
    log.failureOnce("ras-start", "NCCL's RAS not asked: " + outcome.error());
  else if (!outcome->finished)
    log.info(fmt::format("NCCL's RAS still being asked; not waiting any longer (log: {})", request.log_path));
  else if (outcome->exit_code == 0)
    log.info(fmt::format("NCCL's RAS asked for this node (collector off): {}",
                         rasAnswerPath(request.job_dir, request.rank)));
  else
    log.info(fmt::format("NCCL's RAS gave no answer for this node (log: {})", request.log_path));
}

CollectorRequest collectorRequest(const WatchdogConfig& config, const DumpPaths& paths, const DumpStart& dump) {
  CollectorRequest c;
  c.binary = CollectorLauncher::findForensicsBinary(config.forensics_binary);
  c.pid = dump.pid;
  c.rank = dump.rank.value_or(-1);
  c.job_dir = paths.job_dir.empty() ? config.job_dir : paths.job_dir;
  c.log_path = paths.collect_log;
  c.wait_s = config.collect_wait_s;
  c.debugger = config.debugger;
  c.mark_state = dump.rank.has_value();
  c.ask_ras = config.ask_ras;
  return c;
}

RasRequest rasRequest(const WatchdogConfig& config, const DumpPaths& paths, const DumpStart& dump) {
  RasRequest r;
  r.binary = CollectorLauncher::findForensicsBinary(config.forensics_binary);
  r.pid = dump.pid;
  r.rank = *dump.rank;
  r.job_dir = paths.job_dir.empty() ? config.job_dir : paths.job_dir;
  r.log_path = paths.collect_log;
  return r;
}

}  // namespace

// A node peer found this process stopped (SIGSTOP, a job-control stop) and wrote so in its
// stead; since then it was continued (Slurm and torchrun send SIGCONT before their SIGTERM at
// teardown) and dumps itself. Its own state replaces the peer's, but not what the peer saw:
// that it was frozen is why the job hung, and its own dump alone cannot show it.
void keepPeerObservation(RankState& own, const RankState& before) {
  if (!before.stopped_seen_by || before.pid != own.pid) return;
  own.stopped_seen_by = before.stopped_seen_by;
  if (own.note.empty())
    own.note = fmt::format("process {} was stopped when rank {} of its node looked; continued since, it dumped itself",
                           own.pid, *before.stopped_seen_by);
}

DumpPaths dumpPaths(const std::string& job_dir, std::optional<int> rank, pid_t pid) {
  if (!rank) return {job_dir, watchdogSnapshotPathForPid(job_dir, pid), "", collectLogPathForPid(job_dir, pid)};
  return {job_dir, watchdogSnapshotPath(job_dir, *rank), rankStatePath(job_dir, *rank), collectLogPath(job_dir, *rank)};
}

HangResponse planResponse(const WatchdogConfig& config, const DumpPaths& paths, const DumpStart& dump,
                          std::function<bool()> job_complete, const std::optional<RankState>& before) {
  HangResponse response;
  response.on_hang = config.on_hang;
  response.collect = config.collect;
  response.abort_grace_s = config.abort_grace_s;
  response.dump_started = dump.at;
  response.job_complete = std::move(job_complete);
  if (!config.collect && config.ask_ras && dump.node_asks_ras && dump.rank)
    response.ras = rasRequest(config, paths, dump);
  if (dump.rank) {
    RankState& st = response.state;
    st.rank = *dump.rank;
    st.phase = DumpPhase::kCollecting;
    st.pid = dump.pid;
    st.host = dump.host;
    st.time_unix_s = wallClockSeconds();
    const double collector_s = config.collect     ? std::min(config.collect_wait_s, CollectorLauncher::kCollectorBoundS)
                               : response.ras ? response.ras->bound_s + 5
                                              : 0;
    st.deadline_unix_s = st.time_unix_s + collector_s + 5;
    st.snapshot = dump.snapshot;
    st.forensics = config.collect ? "pending" : "off";
    response.state_path = paths.state;
    if (before) keepPeerObservation(st, *before);
  }
  if (config.collect) response.collector = collectorRequest(config, paths, dump);
  return response;
}

HangResponder::HangResponder(std::function<void()> abort_comms, std::function<void(int)> exit_process,
                             TermHandling term)
    : abort_comms_(std::move(abort_comms)), exit_process_(std::move(exit_process)), term_(std::move(term)) {}

TermHandling HangResponder::defaultTermHandling() {
  return {&TermDeferral::pending, &TermDeferral::pendingForSeconds, &TermDeferral::release};
}

void HangResponder::start(const HangResponse& response) {
  if (started_) return;
  started_ = true;
  // Before the thread exists: from here on the job waits for this rank's dumps.
  if (!response.state_path.empty()) writeStateFile(response, response.state);
  std::thread(&HangResponder::respond, response, abort_comms_, exit_process_, term_).detach();
}

void HangResponder::respondHere(const HangResponse& response) {
  if (started_) return;
  started_ = true;
  respond(response, abort_comms_, exit_process_, term_);
}

void HangResponder::respond(HangResponse response, std::function<void()> abort_comms,
                            std::function<void(int)> exit_process, TermHandling term) {
  pthread_setname_np(pthread_self(), "hangwatch-dump");
  DeclaredHang::markOwnThread();
  WatchdogLog& log = WatchdogLog::instance();
  auto termHeld = [&] { return term.pending && term.pending(); };
  RankState state = response.state;
  if (response.collect) {
    CollectorLauncher launcher;
    CollectorRequest request = response.collector;
    request.give_up = [&] { return term.pending_for_s && term.pending_for_s() > kTermHoldS; };
    Expected<CollectorOutcome> outcome = Error{"not started"};
    try {
      outcome = launcher.run(request);
    } catch (const std::exception& e) {
      outcome = Error{e.what()};
    }
    if (!outcome)
      log.failureOnce("collector-start", "collector not run: " + outcome.error());
    else if (!outcome->finished && termHeld())
      noteCutShortByTerm(response, state, *outcome);
    else if (!outcome->finished)
      log.info(fmt::format("collector still running; not waiting any longer (log: {})", request.log_path));
    else if (outcome->exit_code != 0)
      log.failureOnce("collector-exit",
                      fmt::format("collector exited with {} (log: {})", outcome->exit_code, request.log_path));
    state.forensics = collectorResult(outcome);
    // A collector still running marks the rank done itself when it ends.
    if (!outcome || outcome->finished) {
      state.phase = DumpPhase::kDone;
      writeState(response, state);
    }
  } else {
    if (response.ras) askNodesRas(*response.ras, term);
    state.forensics = "off";
    state.phase = DumpPhase::kDone;
    writeState(response, state);
  }
  if (response.on_done) response.on_done();

  if (response.on_hang == OnHang::kAbort && !response.declared && !termHeld()) {
    const auto grace_end = response.dump_started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(response.abort_grace_s));
    bool complete = false;
    while (!(complete = response.job_complete && response.job_complete()) && !termHeld() &&
           std::chrono::steady_clock::now() < grace_end)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (complete) log.info("every rank's dumps are done");
    else if (!termHeld())
      log.info(fmt::format("HANGWATCH_ABORT_GRACE ({} s) passed before every rank's dumps were done; exiting anyway",
                           static_cast<int>(response.abort_grace_s)));
  }
  if (termHeld()) log.info("SIGTERM held back while dumping; passing it on now");
  if (term.release) term.release();
  if (response.on_hang != OnHang::kAbort) return;
  if (response.declared) {
    log.info("HANGWATCH_ON_HANG=abort: the framework that declared the hang ends the job itself");
    return;
  }
  log.info("HANGWATCH_ON_HANG=abort: aborting communicators and exiting");
  // ncclCommAbort may itself get stuck on a broken device; give it a bounded time.
  auto aborted = std::make_shared<std::promise<void>>();
  std::thread([fn = abort_comms, aborted] {
    if (fn) fn();
    aborted->set_value();
  }).detach();
  aborted->get_future().wait_for(std::chrono::seconds(10));
  if (exit_process) exit_process(kAbortExitCode);
}

}  // namespace hangwatch::watchdog
