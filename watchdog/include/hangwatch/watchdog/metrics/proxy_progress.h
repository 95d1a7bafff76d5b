#pragma once
// Where each network connection and each kernel channel of this process got, from
// NCCL's own profiler events (no debugger, no pause): the in-process half of "where
// did the ring stop". Fed by link_profiler.cc on NCCL's proxy threads, read by the
// snapshot builder on the watchdog's poller.
//
// A connection is (NCCL communicator id, channel, peer, direction). Each step of it
// passes four stages, counted as NCCL's net transport records them
// (src/transport/net.cc of NCCL 2.28):
//   send: posted (a buffer given to the GPU, SendGPUWait), filled (the GPU wrote it,
//         SendPeerWait), sent (isend posted, SendWait), done (the network completed it);
//   recv: posted (irecv posted, RecvWait), arrived (the data is here, RecvFlushWait),
//         delivered (handed to the GPU, RecvGPUWait), done (the GPU consumed it).
// Only NET connections report: P2P and SHM links inside a node emit no proxy events.
// A kernel channel is (communicator id, channel): kernels started and stopped on it
// (KernelCh events). Per communicator, the algorithms NCCL chose for its collectives
// (Coll events' `algo`): the connections' steps mean a ring's only when it ran RING.
//
// Memory is fixed (static tables, no allocation, no lock on the proxy thread): at most
// kMaxConnections connections, kOpsPerConnection proxy operations in flight on each,
// kMaxKernelChannels kernel channels; what does not fit is counted as dropped.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hangwatch::watchdog {

inline constexpr int kProxyStages = 4;
inline constexpr int kStepSlots = 8;  // NCCL_STEPS: steps of one operation in flight

// Every event handle the plugin gives NCCL starts with one of these, so that stopEvent
// and recordEventState, which get only the handle, know what it is.
enum ProfilerHandleKind : uint8_t { kOpHandle = 1, kStepHandle = 2, kKernelChHandle = 3 };

struct ProxyConnectionKey {
  uint64_t comm_id = 0;  // NCCL's commHash, the plugin init's commId
  int channel = 0;
  int peer = 0;          // the remote rank, in the communicator
  bool send = false;
};

class ProxyConnection;

// One proxy operation (ProxyOp event) on a connection: the event handle NCCL keeps.
// `kind` must stay first: every handle the plugin gives NCCL starts with its kind.
struct ProxyOpRecord {
  uint8_t kind = kOpHandle;
  std::atomic<bool> in_use{false};
  ProxyConnection* connection = nullptr;
  // Per step slot (step % kStepSlots): the highest stage it reached, and when it was
  // handed to the network (for the link meter's wire time).
  struct Step {
    uint8_t kind = kStepHandle;
    int8_t stage = -1;
    ProxyOpRecord* op = nullptr;
    int64_t wire_start_ns = 0;
    uint64_t bytes = 0;
  } steps[kStepSlots];
};

class ProxyConnection {
 public:
  ProxyConnectionKey key() const;
  int rank() const { return rank_.load(std::memory_order_relaxed); }
  int nranks() const { return nranks_.load(std::memory_order_relaxed); }

  // A step of one of this connection's operations reached `stage` (0..3) at now_ns.
  void advance(int stage, int64_t now_ns);
  void opStarted(int64_t now_ns);
  void opDone(int64_t now_ns);
  // An operation that found all kOpsPerConnection records busy: its steps go uncounted.
  void opUntracked() { untracked_ops_.fetch_add(1, std::memory_order_relaxed); }

  ProxyOpRecord* claimOp();

  struct View {
    ProxyConnectionKey key;
    int rank = -1, nranks = 0;
    uint64_t ops_started = 0, ops_done = 0, untracked_ops = 0;
    uint64_t steps[kProxyStages] = {};
    int64_t moved_ns[kProxyStages] = {};  // 0: never
  };
  View view() const;

 private:
  friend class ProxyProgress;
  static constexpr int kOpsPerConnection = 4;

  // 0 free, 1 being claimed, 2 published.
  std::atomic<int> state_{0};
  uint64_t comm_id_ = 0;
  int channel_ = 0, peer_ = 0;
  bool send_ = false;
  std::atomic<int> rank_{-1}, nranks_{0};
  std::atomic<uint64_t> ops_started_{0}, ops_done_{0}, untracked_ops_{0};
  std::atomic<uint64_t> steps_[kProxyStages] = {};
  std::atomic<int64_t> moved_ns_[kProxyStages] = {};
  ProxyOpRecord ops_[kOpsPerConnection];
};

// One kernel channel; its address is the KernelCh event handle (`kind` first).
struct KernelChannel {
  uint8_t kind = kKernelChHandle;
  std::atomic<int> state{0};  // 0 free, 1 being claimed, 2 published
  uint64_t comm_id = 0;
  int channel = 0;
  std::atomic<uint64_t> started{0}, stopped{0};
  std::atomic<int64_t> started_ns{0}, stopped_ns{0};
};

// The algorithms NCCL 2.28 names in a Coll event (src/collectives.cc, ncclAlgoToString),
// and a last slot for any other name.
inline constexpr int kCollAlgorithms = 8;
const char* collAlgorithmName(int index);
int collAlgorithmIndex(const char* name);  // kCollAlgorithms - 1 for a name not in the list

// One communicator's collectives by algorithm: how many NCCL launched, and when the last one.
struct CommAlgorithms {
  std::atomic<int> state{0};  // 0 free, 1 being claimed, 2 published
  uint64_t comm_id = 0;
  std::atomic<uint64_t> launched[kCollAlgorithms] = {};
  std::atomic<int64_t> last_ns[kCollAlgorithms] = {};
};

class ProxyProgress {
 public:
  static constexpr size_t kMaxConnections = 1024;
  static constexpr size_t kMaxKernelChannels = 512;
  static constexpr size_t kMaxComms = 256;

  // The connection's record, made on first use; nullptr when the table is full.
  ProxyConnection* connection(const ProxyConnectionKey& key, int rank, int nranks);
  KernelChannel* kernelChannel(uint64_t comm_id, int channel);
  // A collective of the communicator was launched with `algo` (a Coll event) at now_ns.
  void collLaunched(uint64_t comm_id, const char* algo, int64_t now_ns);

  std::vector<ProxyConnection::View> connections() const;
  struct KernelChannelView {
    uint64_t comm_id = 0;
    int channel = 0;
    uint64_t started = 0, stopped = 0;
    int64_t started_ns = 0, stopped_ns = 0;
  };
  std::vector<KernelChannelView> kernelChannels() const;
  struct AlgorithmView {
    uint64_t comm_id = 0;
    const char* algo = "";
    uint64_t launched = 0;
    int64_t last_ns = 0;
  };
  std::vector<AlgorithmView> algorithms() const;  // one per (communicator, algorithm) seen
  uint64_t droppedConnections() const { return dropped_connections_.load(std::memory_order_relaxed); }
  uint64_t droppedKernelChannels() const { return dropped_kernel_channels_.load(std::memory_order_relaxed); }
  uint64_t droppedComms() const { return dropped_comms_.load(std::memory_order_relaxed); }

  // Tests only: forget everything (no event may be in flight).
  void resetForTesting();

 private:
  ProxyConnection connections_[kMaxConnections];
  KernelChannel kernel_channels_[kMaxKernelChannels];
  CommAlgorithms comms_[kMaxComms];
  std::atomic<uint64_t> dropped_connections_{0}, dropped_kernel_channels_{0}, dropped_comms_{0};
};

// The process's table, shared by the plugin and the snapshot builder.
ProxyProgress& proxyProgress();

// The names of the four stages of a direction, for the snapshot.
const char* const* proxyStageNames(bool send);

}  // namespace hangwatch::watchdog
