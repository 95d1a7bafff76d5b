#include "hangwatch/watchdog/watchdog.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/watchdog/gpu_clock.h"
#include "hangwatch/watchdog/hang_detector.h"
#include "hangwatch/watchdog/collector_launcher.h"
#include "hangwatch/watchdog/hang_responder.h"
#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/fallback_record.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/common/timeline_window.h"
#include "hangwatch/watchdog/device_scope.h"
#include "hangwatch/watchdog/job_completion.h"
#include "hangwatch/watchdog/last_error_guard.h"
#include "hangwatch/watchdog/nccl_info_log.h"
#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/launch_claim.h"
#include "hangwatch/watchdog/node_share.h"
#include "hangwatch/watchdog/op_poller.h"
#include "hangwatch/watchdog/real_api.h"
#include "hangwatch/watchdog/snapshot_builder.h"
#include "hangwatch/watchdog/stream_identity.h"
#include "hangwatch/watchdog/term_deferral.h"
#include "hangwatch/watchdog/trigger_watcher.h"
#include "hangwatch/watchdog/watchdog_log.h"
#include "hangwatch/watchdog/metrics/metrics_windows.h"

namespace hangwatch::watchdog {
namespace {

// 2 events per timed op: up to 2048 timed ops in flight per device.
constexpr size_t kEventsPerDevice = 4096;
constexpr size_t kIssueQueueSize = 4096;
constexpr size_t kHostSyncQueueSize = 4096;
// Per node, not per rank: the ranks of a node share one schedule (node_share.h).
constexpr int64_t kTriggerCheckNs = 250'000'000;
constexpr int64_t kCompletionPollNs = 1'000'000'000;
// A declared hang holds the framework's abort at most the collector's bound and this long more:
// the deadline this rank's state file promises its readers (hang_responder.cc).
constexpr double kDeclaredHoldMarginS = 5;
// A framework's timeout declares a hang only of an operation pending at least this long
// (PyTorch's shortest useful timeout is seconds; an abort() right after a launch is no hang).
constexpr int64_t kDeclaredMinAgeNs = 1'000'000'000;
// Ops and host syncs kept while this rank is not known yet (a few MB at most).
constexpr size_t kMaxBeforeRank = 16384;
// The board learns a rank and device soon after they are known (a rank may freeze or die in
// its first steps), then checks for a device change now and then.
constexpr int64_t kIdentityPollUnknownNs = 50'000'000;
constexpr int64_t kIdentityPollNs = 1'000'000'000;

// Driver functions the poller uses to name generic kernels launched as cudaKernel_t or
// CUfunction, looked up once through the runtime (libcuda is not linked).
template <typename Fn>
Fn driverFunction(const char* symbol) {
  auto lookup = RealApi::instance().getDriverEntryPointByVersion.get();
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (lookup == nullptr || lookup(symbol, &fn, 12030, cudaEnableDefault, &status) != cudaSuccess) return nullptr;
  return reinterpret_cast<Fn>(fn);
}

const char* kernelName(const PendingOp& op) {
  using NameFn = int (*)(const char**, const void*);  // cuKernelGetName / cuFuncGetName: CUresult, 0 = success
  const char* name = nullptr;
  switch (op.kernel_kind) {
    case KernelHandle::kFunction: {
      auto fn = RealApi::instance().funcGetName.get();
      return fn != nullptr && fn(&name, op.kernel_func) == cudaSuccess ? name : nullptr;
    }
    case KernelHandle::kKernel: {
      static const NameFn fn = driverFunction<NameFn>("cuKernelGetName");
      return fn != nullptr && fn(&name, op.kernel_func) == 0 ? name : nullptr;
    }
    case KernelHandle::kDriverFunction: {
      static const NameFn fn = driverFunction<NameFn>("cuFuncGetName");
      return fn != nullptr && fn(&name, op.kernel_func) == 0 ? name : nullptr;
    }
  }
  return nullptr;
}

// `collect --node`'s argument: the node board's ranks, this rank among them ("0,1,2,3").
std::string nodeRanksArgument(std::vector<int> ranks, int self) {
  if (std::find(ranks.begin(), ranks.end(), self) == ranks.end()) ranks.push_back(self);
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

}  // namespace

std::atomic<int> Watchdog::state_{Watchdog::kUnstarted};
Watchdog* Watchdog::instance_ = nullptr;

Watchdog* Watchdog::startSlow() {
  static std::mutex start_mutex;
  int saved_errno = errno;
  std::lock_guard<std::mutex> lock(start_mutex);
  if (state_.load(std::memory_order_acquire) == kUnstarted) {
    std::string warnings;
    WatchdogConfig config = watchdogConfigFromEnv(nullptr, &warnings);
    if (config.disabled) {
      state_.store(kPassThrough, std::memory_order_release);
    } else {
      // Leaked on purpose: interposed calls may arrive during static destruction.
      instance_ = new Watchdog(std::move(config));
      if (!warnings.empty()) WatchdogLog::instance().failureOnce("config", "ignoring " + warnings);
      pthread_atfork(nullptr, nullptr, &Watchdog::onForkChild);
      instance_->poller_ = std::thread([] { instance_->pollLoop(); });
      // Named here, not by the thread itself: whoever looks right after start sees the name.
      pthread_setname_np(instance_->poller_.native_handle(), "hangwatch-poll");
      instance_->poller_.detach();
      state_.store(kActive, std::memory_order_release);
      installAbortHold();
      TermDeferral::arm();
    }
  }
  errno = saved_errno;
  return state_.load(std::memory_order_acquire) == kActive ? instance_ : nullptr;
}

namespace {

struct sigaction job_abort_action;

// SIGABRT: the framework is ending the process (PyTorch's watchdog after its timeout, an
// uncaught exception, a failed assertion). With a collective pending this rank dumps first;
// then the signal goes on to the job's own action, or kills the process as it would have.
void holdAbort(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (Watchdog::active() && !DeclaredHang::onOwnThread())
    Watchdog::get()->holdForDeclaredHang(DeclaredHang::How::kAbortSignal);
  errno = saved_errno;
  if (job_abort_action.sa_flags & SA_SIGINFO) {
    if (job_abort_action.sa_sigaction != nullptr) job_abort_action.sa_sigaction(sig, info, context);
    return;
  }
  if (job_abort_action.sa_handler == SIG_IGN) return;
  if (job_abort_action.sa_handler != SIG_DFL) {
    job_abort_action.sa_handler(sig);
    return;
  }
  // The default action: pending while this handler runs (SIGABRT is blocked here), delivered
  // as it returns, so the process dies of SIGABRT as it would have.
  sigaction(SIGABRT, &job_abort_action, nullptr);
  raise(sig);
}

}  // namespace

void Watchdog::installAbortHold() {
  struct sigaction hold {};
  hold.sa_sigaction = &holdAbort;
  sigemptyset(&hold.sa_mask);
  hold.sa_flags = SA_SIGINFO | SA_RESTART;
  if (sigaction(SIGABRT, &hold, &job_abort_action) != 0)
    WatchdogLog::instance().failureOnce("sigabrt", "SIGABRT not held for dumps: a framework's abort may cut them short");
}

DeclaredHang::Outcome Watchdog::holdForDeclaredHang(DeclaredHang::How how, uintptr_t comm) noexcept {
  if (stopping_.load(std::memory_order_acquire) || poller_done_.load(std::memory_order_acquire))
    return DeclaredHang::Outcome::kNothingPending;
  const int64_t began = monotonicNs();
  const DeclaredHang::Outcome outcome = declared_.declareAndHold(how, comm, declared_hold_ns_);
  if (outcome != DeclaredHang::Outcome::kNothingPending) {
    // Said once the abort goes on, for the operator and for anyone measuring what the hold costs.
    char line[160];
    const size_t n = DeclaredHang::holdLine(line, sizeof line, launcher_.rank.value_or(-1), how, outcome,
                                            monotonicNs() - began);
    ssize_t ignored = ::write(STDERR_FILENO, line, n);  // async-signal-safe
    (void)ignored;
  }
  return outcome;
}

// A forked child (a dataloader worker) has no poller thread and must not touch the
// parent's events: it becomes a pass-through.
void Watchdog::onForkChild() { state_.store(kPassThrough, std::memory_order_release); }

void Watchdog::onExit() {
  Watchdog* w = instance_;
  if (w == nullptr || state_.load(std::memory_order_acquire) != kActive) return;
  w->stopping_.store(true, std::memory_order_release);
  for (int i = 0; i < 400 && !w->poller_done_.load(std::memory_order_acquire); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (w->poller_done_.load(std::memory_order_acquire) && w->node_ && !w->pending_at_exit_.load(std::memory_order_acquire))
    w->node_->leave();
}

Watchdog::Watchdog(WatchdogConfig config)
    : config_(std::move(config)),
      launcher_(detectRankIdentity()),
      kernel_sample_(config_.kernel_sample),
      timers_(event_api_, kEventsPerDevice),
      issued_(kIssueQueueSize),
      host_syncs_(kHostSyncQueueSize),
      responder_(std::make_unique<HangResponder>([this] { abortCommunicators(); },
                                                 [this](int code) {
                                                   // _exit skips the exit handlers: leave the node's board here,
                                                   // and let a file write in flight end (no temporary file left).
                                                   if (node_) node_->leave();
                                                   if (storage_) storage_->close(std::min(config_.storage_deadline_s, 1.5));
                                                   ::_exit(code);
                                                 })) {
  if (launcher_.rank) WatchdogLog::instance().setRank(*launcher_.rank);
  storage_ = std::make_unique<DumpStorage>(DumpStorageConfig{
      config_.job_dir, config_.fallbackJobDir(), config_.storage_deadline_s,
      config_.io_helper ? CollectorLauncher::findForensicsBinary(config_.forensics_binary) : ""});
  storage_->onFallback([this](const std::string& why, const std::string& where) { tellFallback(why, where); });
  const double collector_s = config_.collect ? std::min(config_.collect_wait_s, CollectorLauncher::kCollectorBoundS) : 0;
  declared_hold_ns_ = static_cast<int64_t>((collector_s + kDeclaredHoldMarginS) * 1e9);
  timers_.on_fill_failure = [](int device, const std::string& why) {
    WatchdogLog::instance().failureOnce(fmt::format("event-pool:{}", device),
                                        fmt::format("device {}: timing with fewer events: {}", device, why));
  };
  timers_.on_calibration_failure = [](int device) {
    WatchdogLog::instance().failureOnce(
        fmt::format("calibration:{}", device),
        fmt::format("no calibration stream on device {}: GPU times are placed approximately", device));
  };
  // Registered after the runtime made its first events, so it runs before the runtime's
  // own teardown: the poller stops querying events that are going away.
  timers_.on_first_timer = [] { std::atexit(&Watchdog::onExit); };
}

bool Watchdog::beginTiming(cudaStream_t stream, Timing* t, int device_hint) {
  LastErrorGuard keep;
  RealApi& api = RealApi::instance();
  // A capturing stream runs nothing now: an event recorded there could never be queried.
  // An error (stream 0 beside a capturing blocking stream) means the user's call fails too.
  if (auto capture_info = api.streamGetCaptureInfo.get()) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (capture_info(stream, &status, &id, nullptr, nullptr, nullptr, nullptr) != cudaSuccess) return false;
    if (status != cudaStreamCaptureStatusNone) {
      t->capture_id = status == cudaStreamCaptureStatusActive ? id : 0;
      return false;
    }
  }
  int current = -1;
  auto get_device = api.getDevice.get();
  if (get_device == nullptr || get_device(&current) != cudaSuccess) return false;
  // Stream 0 and cudaStreamPerThread are the current device's (or the one NCCL switches
  // to); a created stream knows its own.
  int device = current;
  if (!isPerDeviceStream(stream)) {
    auto stream_device = api.streamGetDevice.get();
    if (stream_device == nullptr || stream_device(stream, &device) != cudaSuccess) device = current;
  } else if (device_hint >= 0 && device_hint != current) {
    device = device_hint;
    t->switch_to = device;
  }
  DeviceScope on_device(t->switch_to);
  DeviceTimer* timer = timers_.forDevice(device);
  if (timer == nullptr) return false;
  if (!timer->pool().acquire(&t->start)) return false;
  if (!timer->pool().acquire(&t->end)) {
    timer->pool().release(t->start);
    return false;
  }
  t->timer = timer;
  t->stream_id = streamIdentity(stream, device);
  if (!recordOn(t->start, stream)) {
    abandonTiming(*t);
    return false;
  }
  return true;
}

bool Watchdog::recordOn(cudaEvent_t event, cudaStream_t stream) {
  LastErrorGuard keep;  // our failed record must not become the job's "last error"
  if (event_api_.record(event, stream) == cudaSuccess) return true;
  WatchdogLog::instance().failureOnce("event-record", "cudaEventRecord failed; some operations go untimed");
  return false;
}

void Watchdog::endTiming(const Timing& t, cudaStream_t stream, PendingOp& op) {
  bool recorded;
  {
    DeviceScope on_device(t.switch_to);
    recorded = recordOn(t.end, stream);
  }
  if (!recorded) {
    abandonTiming(t);
    return;
  }
  op.start_event = t.start;
  op.end_event = t.end;
  op.device = t.timer->device();
  op.op.stream = t.stream_id;
  if (!issued_.tryPush(op)) {
    ops_dropped_.fetch_add(1, std::memory_order_relaxed);
    abandonTiming(t);
    return;
  }
  ops_timed_.fetch_add(1, std::memory_order_relaxed);
}

void Watchdog::abandonTiming(const Timing& t) {
  t.timer->pool().release(t.start);
  t.timer->pool().release(t.end);
}

void Watchdog::deferTiming(uintptr_t comm, const Timing& t, const PendingOp& op) {
  DeferredOp d;
  d.comm = comm;
  d.op = op;
  d.start = t.start;
  d.end = t.end;
  d.timer = t.timer;
  d.stream_id = t.stream_id;
  d.switch_to = t.switch_to;
  if (!deferred_.add(d)) {
    abandonTiming(t);
    ops_dropped_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Watchdog::finishDeferred(uintptr_t comm, bool ok) {
  deferred_.take(comm, [&](const DeferredOp& d) {
    Timing t;
    t.start = d.start;
    t.end = d.end;
    t.timer = static_cast<DeviceTimer*>(d.timer);
    t.stream_id = d.stream_id;
    t.switch_to = d.switch_to;
    PendingOp op = d.op;
    if (ok)
      endTiming(t, op.stream_handle, op);
    else
      abandonTiming(t);
  });
}

void Watchdog::recordHostSync(const HostSync& sync) {
  if (!host_syncs_.tryPush(sync)) syncs_dropped_.fetch_add(1, std::memory_order_relaxed);
}

// The rank's device: its first communicator's, else the first device it timed work on.
int Watchdog::snapshotDevice() {
  for (const CommView& c : comms_.view())
    if (c.device >= 0) return c.device;
  return timers_.firstDevice();
}

void Watchdog::abortCommunicators() {
  auto abort = RealApi::instance().commAbort.get();
  if (abort == nullptr) return;
  for (uintptr_t handle : comms_.liveHandles()) {
    comms_.markEnded(handle, CommState::kAborted);
    abort(reinterpret_cast<ncclComm_t>(handle));
  }
}

// The poller thread's own state: no other thread touches it.
struct Watchdog::PollState {
  explicit PollState(Watchdog& w)
      : started_unix_s(processStartUnixS()),
        attempt(w.claimAttemptFolder(started_unix_s)),
        attempt_local(attempt.dir.rfind(w.config_.fallbackJobDir(), 0) == 0),
        poller(w.event_api_, w.timers_, w.comms_, [this, &w](const CompletedOp& op) { w.recordCompleted(*this, op); },
               &kernelName),
        detector(w.config_.timeoutNs()),
        trigger(attempt.dir, kTriggerCheckNs, w.attachNodeShare(attempt), started_unix_s) {
    if (w.config_.warn_after_s > 0)
      stall.emplace(w.config_.warnAfterNs(), [&w](uintptr_t comm) { return w.lastNcclMovementNs(comm); });
  }

  WatchdogLog& log = WatchdogLog::instance();
  double started_unix_s;
  // Every file of this launch goes here: the job folder, or attempts/<name>/ after an earlier launch.
  // Under the fallback folder when the dump folder could not be used at start.
  ClaimedAttempt attempt;
  bool attempt_local = false;  // `attempt` is under the node-local fallback: no storage thread needed
  bool fallback_marked = false;  // the metrics' Prometheus textfile was told of the fallback
  std::unique_ptr<MetricsWindows> metrics;  // once this rank is known
  // What completed before this rank was known (no launcher rank: until its first communicator
  // is made), replayed into its first window; bounded, the rest counted as dropped.
  std::vector<CompletedOp> ops_before_rank;
  std::vector<HostSync> syncs_before_rank;
  uint64_t dropped_before_rank = 0;
  bool late_exit_hook = false;
  OpPoller poller;
  HangDetector detector;
  TriggerWatcher trigger;
  bool dumped = false;
  bool declared = false;  // the framework declared the hang this rank dumps for
  // The early warning: the last episode this rank took a suspect snapshot of, and whether its
  // GPU work has moved again since.
  std::optional<StallDetector> stall;
  int suspect_episode = 0;
  bool awaiting_resume = false;
  int64_t suspected_at_ns = 0;
  uint64_t completed_at_suspect = 0;
  WatchdogSnapshot suspect_snapshot;
  // Launcher rank 0 tells the job, through the beacon, when every rank's dumps are done.
  std::optional<JobCompletion> completion;
  bool completion_announced = false;
  int64_t next_completion_poll_ns = 0;
  // What the node's board was last told of this rank (noteIdentity).
  int noted_rank = -1;
  int noted_device = -1;
  int64_t next_identity_ns = 0;
};

template <typename T>
Expected<T> Watchdog::onDumps(PollState& p, const std::string& what, std::function<Expected<T>()> op) {
  if (p.attempt_local) return op();
  return storage_->call<T>(what, std::move(op));
}

// TRIGGER.json, first writer wins. With the dump folder given up, this node's board still
// tells its peers, and the record goes to the fallback for the report.
Expected<bool> Watchdog::fireTrigger(PollState& p, const TriggerRecord& record) {
  Expected<bool> won = onDumps<bool>(p, "writing TRIGGER.json", [t = &p.trigger, record] { return t->fire(record); });
  if (won) return won;
  // A write that failed is a folder that cannot be written: given up like any other.
  storage_->giveUp(won.error());
  p.trigger.node().markTriggered();
  Expected<Written> w = storage_->write(p.trigger.path(), toJson(record).dump(2) + "\n");
  if (!w) return Error{w.error()};
  return true;
}

// Called once, by DumpStorage, from whichever thread gave the folder up.
void Watchdog::tellFallback(const std::string& why, const std::string& fallback) {
  WatchdogLog::instance().info(fmt::format(
      "dump folder {} given up ({}); this rank's dumps go to {} from now on (`forensics report {} --fallback {}` "
      "reads both)",
      config_.job_dir, why, fallback, config_.job_dir, fallback));
  // Whoever finds the fallback folder learns whose dumps these are (node-local: written here).
  FallbackRecord record{1, config_.job_dir, hostName(), ::getpid(), why, wallClockSeconds()};
  if (auto w = writeFileAtomically(fallbackRecordPath(fallback), toJson(record).dump(1) + "\n"); !w)
    WatchdogLog::instance().failureOnce("fallback-record", "the fallback folder cannot be written either: " + w.error());
}

void Watchdog::pollLoop() {
  DeclaredHang::markOwnThread();
  PollState p(*this);
  while (!stopping_.load(std::memory_order_acquire)) {
    // Whatever goes wrong in one pass (no memory, a throwing library) is logged and
    // the next pass runs: the watchdog never takes the job down.
    try {
      pollOnce(p);
    } catch (const std::exception& e) {
      p.log.failureOnce(fmt::format("poller:{}", e.what()), fmt::format("poller pass failed: {}", e.what()));
    }
    bool busy = p.poller.queues().pendingCount() > 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(busy ? 10 : 50));
  }
  finishPolling(p);
  poller_done_.store(true, std::memory_order_release);
}

void Watchdog::pollOnce(PollState& p) {
  const int64_t now = monotonicNs();
  PendingOp op;
  while (issued_.tryPop(&op)) p.poller.accept(op);
  HostSync sync;
  while (host_syncs_.tryPop(&sync)) {
    startMetrics(p);
    if (p.metrics) p.metrics->recordHostSync(sync);
    else if (p.syncs_before_rank.size() < kMaxBeforeRank) p.syncs_before_rank.push_back(sync);
  }
  timers_.keepCalibrated(now);
  if (now >= p.next_identity_ns) noteIdentity(p, now);
  p.poller.poll(now);
  ops_completed_.store(p.poller.completed(), std::memory_order_relaxed);
  if (!p.dumped)
    if (DeclaredHang::How how = declared_.pending(); how != DeclaredHang::How::kNone) answerDeclaration(p, now, how);
  if (!p.dumped && TermDeferral::pending()) answerTerm(p, now);
  if (!p.dumped) watchForHang(p, now);
  if (!p.dumped)
    watchForStall(p, now);
  else if (!p.completion_announced && now >= p.next_completion_poll_ns)
    followCompletion(p, now);
  if (p.metrics && !p.fallback_marked && storage_->fellBack()) {
    p.fallback_marked = true;
    p.metrics->markDumpFallback(storage_->fallbackRoot());
  }
  if (p.metrics) p.metrics->maybeFlush(now);
}

// The job is exiting: what it issued since the last pass and what has completed
// meanwhile still goes into the last window (a short job may have no other).
void Watchdog::finishPolling(PollState& p) {
  try {
    PendingOp op;
    while (issued_.tryPop(&op)) p.poller.accept(op);
    p.poller.poll(monotonicNs());
    pending_at_exit_.store(p.poller.queues().pendingCount() > 0, std::memory_order_release);
  } catch (const std::exception& e) {
    p.log.failureOnce(fmt::format("poller:{}", e.what()), fmt::format("last poller pass failed: {}", e.what()));
  }
  if (p.metrics) p.metrics->flush(monotonicNs());
  // The last window is queued for the storage thread: written before the process goes, unless
  // the dump folder is that slow (onExit waits 2 s for the poller in all).
  storage_->drain(std::min(config_.storage_deadline_s, 1.5));
  // Before onExit stops waiting: the Prometheus textfile of a finished rank goes away here.
  p.metrics.reset();
  // Nobody answers a held SIGTERM from here on: it goes to the job's own action.
  TermDeferral::release();
}

ClaimedAttempt Watchdog::claimAttemptFolder(double started_unix_s) {
  AttemptClaim claim{config_.job_dir, jobIdFromEnv(), launchKeyFromEnv(), started_unix_s, hostName(), ::getpid(),
                     launcher_.rank};
  // The node's first rank of this launch claims for all of them (launch_claim.h).
  auto claim_here = [&] { return claimHere(claim); };
  const std::string board = LaunchClaim::boardPath("/dev/shm", config_.job_dir, claim.launch.key, claim.host, ::getppid());
  LaunchClaim::Outcome got = LaunchClaim::claimOnce(board, claim_here, config_.storage_deadline_s + 5);
  // The claimer found the dump folder unusable: this rank's files go to the fallback too.
  if (got.from_board && !got.claim.gave_up.empty()) storage_->giveUp(got.claim.gave_up);
  ClaimedAttempt& attempt = got.claim.attempt;
  if (attempt.dir != config_.job_dir && attempt.dir != config_.fallbackJobDir())
    WatchdogLog::instance().info(fmt::format("the job folder holds an earlier launch: this one's files go to {}",
                                             attempt.dir));
  return std::move(attempt);
}

NodeClaim Watchdog::claimHere(const AttemptClaim& claim) {
  Expected<ClaimedAttempt> attempt = storage_->call<ClaimedAttempt>(
      "claiming this launch's folder in " + config_.job_dir, [claim] { return claimAttempt(claim); });
  std::string gave_up;
  if (!attempt) {
    // Full, read-only, gone or stalled from the start: the launch's folder is claimed under
    // the fallback, and every file of this rank goes there (said once, by tellFallback).
    gave_up = attempt.error();
    storage_->giveUp(gave_up);
    AttemptClaim local = claim;
    local.job_dir = config_.fallbackJobDir();
    attempt = claimAttempt(local);
  }
  if (!attempt) {
    // Still safe: the trigger watcher ignores a TRIGGER.json older than this process.
    WatchdogLog::instance().failureOnce("attempt", "dumps go to " + config_.fallbackJobDir() + ": " + attempt.error());
    return {ClaimedAttempt{config_.fallbackJobDir(), AttemptRecord{}}, gave_up};
  }
  return {std::move(*attempt), gave_up};
}

NodeShare* Watchdog::attachNodeShare(const ClaimedAttempt& attempt) {
  const AttemptRecord& r = attempt.record;
  std::string identity = r.host.empty() ? "" : fmt::format("{}:{}:{:.3f}", r.host, r.pid, r.started_unix_s);
  if (auto share = NodeShare::attach(attempt.dir, "/dev/shm", identity, launcher_.rank.value_or(-1))) {
    node_ = std::move(*share);
  } else {
    WatchdogLog::instance().failureOnce(
        "node-share", "this rank watches shared storage on its own, not once per node: " + share.error());
    node_ = NodeShare::unshared();
  }
  return node_.get();
}

// The node's board learns this rank's number and device once they are known (without a
// launcher, only once a communicator is made), so its peers can name it should it die or freeze.
void Watchdog::noteIdentity(PollState& p, int64_t now_ns) {
  const int rank = snapshotRank(launcher_, comms_).value_or(-1);
  const int device = snapshotDevice();
  p.next_identity_ns = now_ns + (rank >= 0 && device >= 0 ? kIdentityPollNs : kIdentityPollUnknownNs);
  if (rank == p.noted_rank && device == p.noted_device) return;
  p.noted_rank = rank;
  p.noted_device = device;
  node_->noteIdentity(rank, device);
  if (p.metrics && device >= 0) p.metrics->setDevice(device);
}

void Watchdog::startMetrics(PollState& p) {
  std::optional<int> rank = snapshotRank(launcher_, comms_);
  if (p.metrics || !rank) return;
  MetricsConfig mc;
  mc.rank = *rank;
  mc.path = metricsPath(p.attempt.dir, *rank);
  mc.interval_s = config_.metrics_interval_s;
  mc.timeline_path = timelinePath(p.attempt.dir, *rank);
  mc.attempt = p.attempt.record.name;
  mc.host = hostName();
  mc.device = snapshotDevice();
  mc.links = &linkMeter();
  if (!config_.prometheus_dir.empty()) mc.prometheus_path = PrometheusTextfile::pathFor(config_.prometheus_dir, *rank);
  mc.log_failure = [&log = p.log](const std::string& m) { log.failureOnce("metrics-write", m); };
  if (!p.attempt_local) {
    mc.append_line = [s = storage_.get()](const std::string& path, std::string line) { s->appendLater(path, std::move(line)); };
    mc.replace_file = [s = storage_.get()](const std::string& path, std::string text) { s->writeLater(path, std::move(text)); };
  }
  // The first window starts when the first op kept before the rank was known did.
  for (const CompletedOp& op : p.ops_before_rank)
    if (op.gpu_start_ns > 0 && (mc.start_ns == 0 || op.gpu_start_ns < mc.start_ns)) mc.start_ns = op.gpu_start_ns;
  for (const HostSync& sync : p.syncs_before_rank)
    if (sync.start_ns > 0 && (mc.start_ns == 0 || sync.start_ns < mc.start_ns)) mc.start_ns = sync.start_ns;
  p.metrics = std::make_unique<MetricsWindows>(mc);
  for (const CompletedOp& op : p.ops_before_rank) p.metrics->record(op);
  for (const HostSync& sync : p.syncs_before_rank) p.metrics->recordHostSync(sync);
  p.metrics->noteDropped(p.dropped_before_rank);
  p.ops_before_rank = {};
  p.syncs_before_rank = {};
}

void Watchdog::recordCompleted(PollState& p, const CompletedOp& op) {
  startMetrics(p);
  if (!p.metrics) {
    if (p.ops_before_rank.size() < kMaxBeforeRank) p.ops_before_rank.push_back(op);
    else ++p.dropped_before_rank;
    return;
  }
  p.metrics->record(op);
  if (!p.late_exit_hook) {
    // Again, now that the metrics code made its statics: exit handlers run in
    // reverse, so the poller stops before anything it still uses is destroyed.
    p.late_exit_hook = true;
    std::atexit(&Watchdog::onExit);
  }
}

void Watchdog::watchForHang(PollState& p, int64_t now_ns) {
  if (auto finding = p.detector.check(p.poller.queues(), host_calls_, comms_, now_ns)) {
    auto won = fireTrigger(p, triggerRecordFor(*finding, snapshotRank(launcher_, comms_)));
    if (!won) p.log.failureOnce("trigger-write", "TRIGGER.json not written: " + won.error());
    p.log.info(fmt::format("hang: {}{}", describeHang(*finding),
                           won.ok() && *won ? "; TRIGGER.json written" : "; another rank triggered first"));
    dump(p, true, now_ns);
  } else if (p.trigger.node().triggered()) {
    dump(p, false, now_ns);
  } else if (p.trigger.claimLookup(now_ns)) {
    // This rank's turn to look at shared storage, on the storage thread. When the folder
    // cannot answer, the node's board still tells: a peer that dumped marked it.
    Expected<bool> seen =
        onDumps<bool>(p, "looking for TRIGGER.json", [t = &p.trigger] { return Expected<bool>(t->lookUp()); });
    if (seen ? *seen : p.trigger.node().triggered()) dump(p, false, now_ns);
  }
}

void Watchdog::answerDeclaration(PollState& p, int64_t now_ns, DeclaredHang::How how) {
  const char* who = how == DeclaredHang::How::kCommAbort ? "ncclCommAbort" : "SIGABRT";
  auto finding = declaredHangFinding(p.poller.queues(), now_ns, DeclaredHang::reason(how), kDeclaredMinAgeNs,
                                     declared_.pendingComm());
  if (!finding) {
    declared_.decline();
    p.log.info(fmt::format("{} with no GPU communication pending for {} s or more: not a hang, not dumping", who,
                           kDeclaredMinAgeNs / 1'000'000'000));
    return;
  }
  auto won = fireTrigger(p, triggerRecordFor(*finding, snapshotRank(launcher_, comms_)));
  if (!won) p.log.failureOnce("trigger-write", "TRIGGER.json not written: " + won.error());
  p.log.info(fmt::format("the framework declared a hang ({}): {}{}; dumping before it goes on", who,
                         describeHang(*finding),
                         won.ok() && *won ? "; TRIGGER.json written" : "; another rank triggered first"));
  p.declared = true;
  dump(p, true, now_ns);
}

// A SIGTERM from the launcher (a time limit, scancel, --kill-on-bad-exit after another rank
// failed) with GPU communication pending for kDeclaredMinAgeNs is the end of a hung job: this
// rank dumps first (reason launcher-signal) and the signal goes on once its dumps are done
// (the responder, at most HangResponder::kTermHoldS). Communication pending for less waits
// that long (a rank that just failed leaves the others inside their collective for a moment
// only); none at all, or one that completes meanwhile: the signal goes on now.
void Watchdog::answerTerm(PollState& p, int64_t now_ns) {
  const double held_s = TermDeferral::pendingForSeconds();
  auto finding = declaredHangFinding(p.poller.queues(), now_ns, "launcher-signal", kDeclaredMinAgeNs);
  if (!finding) {
    if (held_s * 1e9 < kDeclaredMinAgeNs && declaredHangFinding(p.poller.queues(), now_ns, "launcher-signal", 0))
      return;
    p.log.info(fmt::format("SIGTERM with no GPU communication pending for {} s or more: passing it on",
                           kDeclaredMinAgeNs / 1'000'000'000));
    // Its node peers, should they dump, say it ended on the launcher's signal: no cause of a hang.
    if (node_ && TermDeferral::releaseEndsProcess()) node_->leaveOnTerm();
    TermDeferral::release();
    return;
  }
  auto won = fireTrigger(p, triggerRecordFor(*finding, snapshotRank(launcher_, comms_)));
  if (!won) p.log.failureOnce("trigger-write", "TRIGGER.json not written: " + won.error());
  p.log.info(fmt::format("SIGTERM from the launcher while {}{}; dumping before it goes on", describeHang(*finding),
                         won.ok() && *won ? "; TRIGGER.json written" : "; another rank triggered first"));
  p.declared = true;
  dump(p, true, now_ns);
}

void Watchdog::watchForStall(PollState& p, int64_t now_ns) {
  if (!p.stall) return;
  const int announced = p.trigger.suspectedEpisode();
  // A rank that saw every warning so far and moved on since may start the next one.
  if (!p.awaiting_resume && announced <= p.suspect_episode) {
    if (auto finding = p.stall->check(p.poller.queues(), now_ns)) {
      const int episode = p.suspect_episode + 1;
      TriggerRecord record = triggerRecordFor(*finding, snapshotRank(launcher_, comms_));
      auto won = onDumps<bool>(p, "writing SUSPECT.json",
                               [t = &p.trigger, record, episode] { return t->fireSuspect(record, episode); });
      if (!won) p.log.failureOnce("suspect-write", "SUSPECT.json not written: " + won.error());
      p.log.info(fmt::format("early warning: {}{}", describeHang(*finding),
                             won.ok() && *won ? "; SUSPECT.json written, the job runs on" : ""));
    }
  }
  const int now_announced = p.trigger.suspectedEpisode();
  if (now_announced > p.suspect_episode) takeSuspectSnapshot(p, now_announced, now_ns);
  if (p.awaiting_resume && p.poller.completed() > p.completed_at_suspect && !p.stall->check(p.poller.queues(), now_ns))
    recordResumed(p, now_ns);
}

void Watchdog::takeSuspectSnapshot(PollState& p, int episode, int64_t now_ns) {
  p.suspect_episode = episode;
  p.awaiting_resume = true;
  p.suspected_at_ns = now_ns;
  p.completed_at_suspect = p.poller.completed();
  WatchdogSnapshot snapshot = takeSnapshot(p, false, now_ns);
  if (Expected<TriggerRecord> warning = onDumps<TriggerRecord>(
          p, "reading SUSPECT.json", [path = suspectPath(p.attempt.dir, episode)] { return readTriggerFile(path); }))
    snapshot.trigger = *warning;
  snapshot.suspect = SuspectState{episode, std::nullopt};
  if (!snapshot.identity.rank) return;  // nobody can place a rank without a number
  const std::string path = suspectSnapshotPath(p.attempt.dir, *snapshot.identity.rank);
  if (auto w = storage_->write(path, toJson(snapshot).dump(1) + "\n"); !w)
    p.log.failureOnce("suspect-snapshot", "suspect snapshot not written: " + w.error());
  else
    p.log.info(fmt::format("early warning {} seen; snapshot {}", episode, w->path));
  p.suspect_snapshot = std::move(snapshot);
  startMetrics(p);
  if (p.metrics) p.metrics->markSuspected(true);
}

void Watchdog::recordResumed(PollState& p, int64_t now_ns) {
  p.awaiting_resume = false;
  const double after_s = static_cast<double>(now_ns - p.suspected_at_ns) * 1e-9;
  if (p.suspect_snapshot.suspect && p.suspect_snapshot.identity.rank) {
    p.suspect_snapshot.suspect->resumed_after_s = after_s;
    const std::string path = suspectSnapshotPath(p.attempt.dir, *p.suspect_snapshot.identity.rank);
    if (auto w = storage_->write(path, toJson(p.suspect_snapshot).dump(1) + "\n"); !w)
      p.log.failureOnce("suspect-snapshot", "suspect snapshot not updated: " + w.error());
  }
  p.log.info(fmt::format("moved again {:.1f} s after early warning {}", after_s, p.suspect_episode));
  if (p.metrics) p.metrics->markSuspected(false);
}

// The newest movement NCCL's profiler saw on the communicator: a proxy step of any of its
// network connections, or a kernel channel starting or stopping.
int64_t Watchdog::lastNcclMovementNs(uintptr_t comm_handle) {
  CommEntry* e = comms_.find(comm_handle);
  const uint64_t id = e ? e->nccl_id.load(std::memory_order_relaxed) : 0;
  if (id == 0) return 0;
  int64_t latest = 0;
  for (const ProxyConnection::View& c : proxyProgress().connections()) {
    if (c.key.comm_id != id) continue;
    for (int64_t t : c.moved_ns) latest = std::max(latest, t);
  }
  for (const ProxyProgress::KernelChannelView& k : proxyProgress().kernelChannels()) {
    if (k.comm_id == id) latest = std::max({latest, k.started_ns, k.stopped_ns});
  }
  return latest;
}

WatchdogSnapshot Watchdog::takeSnapshot(PollState& p, bool detected_here, int64_t now_ns) {
  SnapshotInputs in;
  in.queues = &p.poller.queues();
  in.comms = &comms_;
  in.host_calls = &host_calls_;
  in.launcher = launcher_;
  in.job_id = jobIdFromEnv();
  if (int device = snapshotDevice(); device >= 0) in.device = device;
  in.detected_here = detected_here;
  in.timeout_s = config_.timeout_s;
  in.now_ns = now_ns;
  in.kernel_namer = &kernelName;
  in.health = {p.log.failures(), ops_timed_.load(), p.poller.completed(), timers_.exhausted(), ops_dropped_.load()};
  Expected<std::optional<TriggerRecord>> trigger = onDumps<std::optional<TriggerRecord>>(
      p, "reading TRIGGER.json", [t = &p.trigger] { return Expected<std::optional<TriggerRecord>>(t->read()); });
  if (trigger) in.trigger = *trigger;
  in.progress = &proxyProgress();
  in.nccl_ids = &ncclCommIds();
  in.nccl_log = ncclInfoLogForSnapshot();
  return buildSnapshot(in);
}

void Watchdog::dump(PollState& p, bool detected_here, int64_t now_ns) {
  p.dumped = true;
  declared_.dumpingBegan();
  // A launcher's SIGTERM from here on waits until the snapshot is whole and the collector done.
  TermDeferral::arm();
  DumpStart start;
  start.at = std::chrono::steady_clock::now();
  WatchdogSnapshot snapshot = takeSnapshot(p, detected_here, now_ns);
  start.rank = snapshot.identity.rank;
  start.host = snapshot.identity.host;
  start.pid = ::getpid();
  start.node_asks_ras = start.rank && !snapshot.comms.empty() && lowestLiveRankOfNode(*start.rank);
  DumpPaths paths = dumpPaths(storage_->place(p.attempt.dir), start.rank, start.pid);
  auto written = storage_->write(paths.snapshot, toJson(snapshot).dump(2) + "\n");
  if (!written)
    p.log.failureOnce("snapshot-write", "snapshot not written: " + written.error());
  else
    p.log.info(fmt::format("{}; snapshot {}", detected_here ? "hang detected" : "TRIGGER.json seen", written->path));
  // The snapshot may have been the write that gave the dump folder up: the state file and the
  // collector's files then go to the fallback too, beside it.
  paths = dumpPaths(storage_->place(p.attempt.dir), start.rank, start.pid);
  start.snapshot = written ? "written" : "failed: " + written.error();
  if (start.rank) recordGoneMembers(p, *start.rank, start.host);
  startMetrics(p);
  if (p.metrics) {
    p.metrics->markHang();
    p.metrics->flush(now_ns);
  }
  std::optional<RankState> before;
  if (!paths.state.empty())
    if (Expected<RankState> in_place = onDumps<RankState>(p, "reading " + paths.state,
                                                          [path = paths.state] { return readRankState(path); }))
      before = std::move(*in_place);
  HangResponse response =
      planResponse(config_, paths, start, [node = node_.get()] { return node->complete(); }, before);
  response.write_file = [s = storage_.get()](const std::string& path, std::string text) {
    return s->write(path, std::move(text));
  };
  response.on_done = [declared = &declared_] { declared->dumpsDone(); };  // the watchdog is never freed
  response.declared = p.declared;
  // Only with a board the node's ranks share: alone, each rank would write its node's file.
  if (config_.node_summary && start.rank && node_->shared())
    response.collector.node_ranks = nodeRanksArgument(node_->memberRanks(), *start.rank);
  responder_->start(response);
}

// Whether `self` is the lowest rank of its node's board among the members that are alive and
// not stopped (true without a board: the rank is its own node as far as it can tell).
bool Watchdog::lowestLiveRankOfNode(int self) const {
  std::vector<int> live = node_->memberRanks();
  for (const NodeShare::GoneMember& g : node_->goneMembers()) std::erase(live, g.rank);
  for (const NodeShare::StoppedMember& m : node_->stoppedMembers()) std::erase(live, m.rank);
  return std::none_of(live.begin(), live.end(), [self](int r) { return r < self; });
}

// Ranks of this node whose process has ended (killed, crashed, exited) or is stopped (frozen:
// SIGSTOP, a job-control stop) never write their state: say so in their stead, so that
// `abort` mode does not wait out its grace for them and the report can tell a rank that exited
// or froze from one whose dumps are lost. Never over a file the rank wrote itself (a frozen
// rank that is continued dumps and writes its own over this one).
void Watchdog::recordGoneMembers(PollState& p, int self, const std::string& host) {
  auto record = [&](int rank, pid_t pid, int device, RankState s, const std::string& what) {
    if (rank == self) return;
    const std::string path = rankStatePath(storage_->place(p.attempt.dir), rank);
    Expected<bool> exists = onDumps<bool>(p, "looking for " + path,
                                          [path] { return Expected<bool>(dumpFs().stat(path).has_value()); });
    if (!exists || *exists) return;
    s.rank = rank;
    s.phase = DumpPhase::kDone;
    s.pid = pid;
    s.host = host;
    if (device >= 0) s.device = device;
    s.time_unix_s = wallClockSeconds();
    s.forensics = "off";
    if (auto w = storage_->write(path, toJson(s).dump(2) + "\n"); !w)
      p.log.failureOnce("gone-state", "state of a rank of this node not written: " + w.error());
    else
      p.log.info(fmt::format("rank {} (pid {}) of this node {}; noted in {}", rank, pid, what, path));
  };
  for (const NodeShare::GoneMember& g : node_->goneMembers()) {
    RankState s;
    s.snapshot = "none: the process had exited";
    s.note = g.left      ? fmt::format("process {} had ended, with no GPU work pending, when rank {} of this node dumped",
                                       g.pid, self)
             : g.on_term ? fmt::format("process {} had ended on a SIGTERM (the launcher ending the job) it passed on "
                                       "with no GPU communication pending, when rank {} of this node dumped",
                                       g.pid, self)
                         : fmt::format("process {} was gone (killed, crashed, or exited with GPU work in flight) when "
                                       "rank {} of this node dumped",
                                       g.pid, self);
    s.exited_seen_by = self;
    s.exited_on_term = g.on_term;
    record(g.rank, g.pid, g.device, std::move(s),
           fmt::format("has exited ({})", g.left      ? "nothing was pending"
                                          : g.on_term ? "on the launcher's SIGTERM, nothing pending"
                                                      : "killed, crashed or mid-collective"));
  }
  for (const NodeShare::StoppedMember& m : node_->stoppedMembers()) {
    RankState s;
    s.snapshot = "none: the process is stopped";
    s.note = fmt::format("process {} was stopped (state T: SIGSTOP or a job-control stop, no debugger attached) when "
                         "rank {} of this node looked",
                         m.pid, self);
    s.stopped_seen_by = self;
    record(m.rank, m.pid, m.device, std::move(s), "is stopped (frozen)");
  }
}

void Watchdog::followCompletion(PollState& p, int64_t now_ns) {
  p.next_completion_poll_ns = now_ns + kCompletionPollNs;
  std::optional<int> rank = snapshotRank(launcher_, comms_);
  // A node peer that died after this rank dumped (while it dumped itself, say) is named too.
  if (rank) recordGoneMembers(p, *rank, hostName());
  if (!p.completion && rank == 0) {
    // State files are per process: the launcher's world when there is one (a process that
    // drives several devices holds several ranks of a larger communicator), else the largest
    // communicator's (one process per rank, ranks from NCCL).
    int world = launcher_.world_size.value_or(0);
    if (world == 0)
      for (const CommView& c : comms_.view()) world = std::max(world, c.size);
    if (world > 0) p.completion.emplace(p.attempt.dir, world);
  }
  auto completion_polled = [&] {
    Expected<bool> done = onDumps<bool>(p, "reading the ranks' state files", [c = &*p.completion] {
      return Expected<bool>(c->poll(wallClockSeconds()));
    });
    return done && *done;
  };
  if (p.completion && completion_polled()) {
    p.completion_announced = true;
    const JobCompletion& c = *p.completion;
    auto said = onDumps<bool>(p, "announcing completion in TRIGGER.beacon",
                              [t = &p.trigger, done = c.ranksDone(), given_up = c.ranksGivenUp()] {
                                return t->announceComplete(done, given_up, wallClockSeconds());
                              });
    if (!said)
      p.log.failureOnce("beacon-complete", "every rank is done but the beacon does not say so: " + said.error());
    else
      p.log.info(fmt::format("every rank's dumps are done ({} done, {} past their deadline, {} silent: no state "
                             "{} s after this rank began waiting)",
                             c.ranksDone(), c.ranksGivenUp() - c.ranksSilent(), c.ranksSilent(),
                             static_cast<int>(JobCompletion::kAnswerWindowS)));
  } else if (!p.completion && config_.on_hang == OnHang::kAbort) {
    Expected<bool> complete = onDumps<bool>(p, "reading TRIGGER.beacon",
                                            [t = &p.trigger, now_ns] { return Expected<bool>(t->jobComplete(now_ns)); });
    p.completion_announced = complete ? *complete : p.trigger.node().complete();
  }
}

}  // namespace hangwatch::watchdog

extern "C" int hangwatch_watchdog_active(void) { return hangwatch::watchdog::Watchdog::active() ? 1 : 0; }

extern "C" unsigned long long hangwatch_ops_completed(void) {
  hangwatch::watchdog::Watchdog* w = hangwatch::watchdog::Watchdog::active() ? hangwatch::watchdog::Watchdog::get() : nullptr;
  return w ? w->opsCompleted() : 0;
}
