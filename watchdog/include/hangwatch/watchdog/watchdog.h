#pragma once
// The process-wide watchdog inside libhangwatch.so: created on the first
// intercepted call, it owns the event pool, the issue queue, the communicator
// table and the poller thread that times, detects, triggers and dumps.
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "hangwatch/common/attempt.h"
#include "hangwatch/watchdog/bounded_queue.h"
#include "hangwatch/watchdog/comm_table.h"
#include "hangwatch/watchdog/declared_hang.h"
#include "hangwatch/watchdog/cuda_event_api.h"
#include "hangwatch/watchdog/device_timers.h"
#include "hangwatch/watchdog/deferred_ops.h"
#include "hangwatch/watchdog/graph_registry.h"
#include "hangwatch/watchdog/launch_claim.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/watchdog/host_call_slots.h"
#include "hangwatch/common/trigger_record.h"
#include "hangwatch/watchdog/dump_storage.h"
#include "hangwatch/watchdog/pending_op.h"
#include "hangwatch/watchdog/watchdog_config.h"

namespace hangwatch {
struct WatchdogSnapshot;
}

namespace hangwatch::watchdog {

class HangResponder;
class NodeShare;

class Watchdog {
 public:
  // Starts the watchdog from a call that is only passed through (cudaSetDevice,
  // ncclGetUniqueId): the caller's errno is kept.
  static void startFromPassThrough() {
    const int saved = errno;
    get();
    errno = saved;
  }

  // The running watchdog, or nullptr for a pass-through (HANGWATCH_DISABLE=1, a
  // forked child, a failed start). The first call starts it.
  static Watchdog* get() {
    int s = state_.load(std::memory_order_acquire);
    if (__builtin_expect(s == kActive, 1)) return instance_;
    if (s == kPassThrough) return nullptr;
    return startSlow();
  }

  // 1 in kernel_sample generic kernel launches of each thread is timed.
  bool sampleKernel() {
    if (kernel_sample_ == 0) return false;
    static thread_local uint32_t n __attribute__((tls_model("initial-exec"))) = 0;
    return ++n % kernel_sample_ == 0;
  }

  struct Timing {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
    DeviceTimer* timer = nullptr;  // the device of `stream`: its events, its clock
    uint64_t stream_id = 0;        // stream_identity.h
    int switch_to = -1;            // stream 0 of a device that is not current: record there
    uint64_t capture_id = 0;       // not timed: the stream is capturing into this sequence
  };
  // Takes two events of the stream's device and records the start on `stream`;
  // false: leave it untimed. Never changes the thread's CUDA last error. Nothing is
  // recorded on a capturing stream: false with `capture_id` set (graph_registry.h). `device`: the
  // device stream 0 means when the caller knows better than the current device (NCCL
  // launches on its communicator's device), -1 otherwise.
  bool beginTiming(cudaStream_t stream, Timing* t, int device = -1);
  // Records the end event and queues the operation for the poller.
  void endTiming(const Timing& t, cudaStream_t stream, PendingOp& op);
  // The timed call failed: give the events back.
  void abandonTiming(const Timing& t);
  // A non-blocking communicator's call returned ncclInProgress: the end event waits
  // until the communicator is seen ready (deferred_ops.h).
  void deferTiming(uintptr_t comm, const Timing& t, const PendingOp& op);
  // The communicator was seen ready (`ok`) or failed: its deferred operations are
  // ended behind their kernels, or given up.
  void finishDeferred(uintptr_t comm, bool ok);
  bool hasDeferred(uintptr_t comm) { return deferred_.has(comm); }
  bool recordOn(cudaEvent_t event, cudaStream_t stream);

  void recordHostSync(const HostSync& sync);

  CommTable& comms() { return comms_; }
  GraphRegistry& graphs() { return graphs_; }
  HostCallSlots& hostCalls() { return host_calls_; }
  uint64_t opsCompleted() const { return ops_completed_.load(std::memory_order_relaxed); }
  static bool active() { return state_.load(std::memory_order_acquire) == kActive; }

  // The framework declares a hang (declared_hang.h): dump now if a collective is pending, and
  // hold the calling thread until this rank's dumps are done, at most the deadline its state
  // file promises (the collector's bound + 5 s). Async-signal-safe.
  // `comm`: the communicator being aborted (0: any).
  DeclaredHang::Outcome holdForDeclaredHang(DeclaredHang::How how, uintptr_t comm = 0) noexcept;

 private:
  enum : int { kUnstarted = 0, kActive = 1, kPassThrough = 2 };

  explicit Watchdog(WatchdogConfig config);
  static Watchdog* startSlow();
  static void onForkChild();
  static void onExit();

  struct PollState;
  void pollLoop();
  void pollOnce(PollState& p);
  void finishPolling(PollState& p);
  // This launch's folder in the job folder (attempt.h), claimed when this rank is its first.
  ClaimedAttempt claimAttemptFolder(double started_unix_s);
  NodeClaim claimHere(const AttemptClaim& claim);
  NodeShare* attachNodeShare(const ClaimedAttempt& attempt);
  void noteIdentity(PollState& p, int64_t now_ns);
  void startMetrics(PollState& p);
  void recordCompleted(PollState& p, const CompletedOp& op);
  void watchForHang(PollState& p, int64_t now_ns);
  void answerDeclaration(PollState& p, int64_t now_ns, DeclaredHang::How how);
  void answerTerm(PollState& p, int64_t now_ns);
  static void installAbortHold();
  // The early warning (HANGWATCH_WARN_AFTER): suspect snapshots, no debugger, no pause.
  void watchForStall(PollState& p, int64_t now_ns);
  void takeSuspectSnapshot(PollState& p, int episode, int64_t now_ns);
  void recordResumed(PollState& p, int64_t now_ns);
  int64_t lastNcclMovementNs(uintptr_t comm_handle);
  WatchdogSnapshot takeSnapshot(PollState& p, bool detected_here, int64_t now_ns);
  void dump(PollState& p, bool detected_here, int64_t now_ns);
  void followCompletion(PollState& p, int64_t now_ns);
  void recordGoneMembers(PollState& p, int self, const std::string& host);
  bool lowestLiveRankOfNode(int self) const;
  // Runs `op` on this launch's folder: on the storage thread, bounded, while that folder is on
  // shared storage; here once it is the node-local fallback (given up at start).
  template <typename T>
  Expected<T> onDumps(PollState& p, const std::string& what, std::function<Expected<T>()> op);
  Expected<bool> fireTrigger(PollState& p, const TriggerRecord& record);
  void tellFallback(const std::string& why, const std::string& fallback);
  int snapshotDevice();
  void abortCommunicators();

  static std::atomic<int> state_;
  static Watchdog* instance_;

  WatchdogConfig config_;
  RankIdentity launcher_;
  uint32_t kernel_sample_;
  CudaEventApi event_api_;
  DeviceTimers timers_;
  BoundedQueue<PendingOp> issued_;
  BoundedQueue<HostSync> host_syncs_;
  std::atomic<uint64_t> ops_timed_{0};
  std::atomic<uint64_t> ops_dropped_{0};
  std::atomic<uint64_t> syncs_dropped_{0};
  std::atomic<uint64_t> ops_completed_{0};
  CommTable comms_;
  GraphRegistry graphs_;
  DeferredOps deferred_;
  HostCallSlots host_calls_;
  std::unique_ptr<HangResponder> responder_;
  std::unique_ptr<NodeShare> node_;  // this node's shared trigger board, made by the poller
  std::unique_ptr<DumpStorage> storage_;  // every file operation on the dump folder
  std::thread poller_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> poller_done_{false};
  // GPU work still pending at the poller's last pass: a rank exiting with a collective in flight
  // stays on its node's board, so the ranks left waiting name it as exited.
  std::atomic<bool> pending_at_exit_{false};
  DeclaredHang declared_;
  int64_t declared_hold_ns_ = 0;
};

}  // namespace hangwatch::watchdog

// Diagnostics for tests and tools, exported next to the interposers.
extern "C" {
// 1 while this process runs a watchdog (0: not started, disabled, or a forked child).
int hangwatch_watchdog_active(void);
// Timed operations the poller has seen complete.
unsigned long long hangwatch_ops_completed(void);
}
