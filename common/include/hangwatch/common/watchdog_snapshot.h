#pragma once
// ranks/rNNNNN.watchdog.json (DESIGN.md §4): what one rank's watchdog knew at the
// moment of a hang. Written by libhangwatch.so, read by the analyzer and report.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/trigger_record.h"

namespace hangwatch {

struct SnapshotIdentity {
  std::optional<int> rank;
  std::optional<int> local_rank;
  std::optional<int> world_size;
  std::string rank_source;           // launcher variable the rank came from, or "communicator"
  std::string host;
  int64_t pid = 0;
  std::string job_id;
  std::optional<int> device;         // CUDA device ordinal the rank used
  std::string cuda_visible_devices;  // as in the environment, empty when unset
};

struct SnapshotComm {
  std::string hash;                  // hex; equal on every member rank of the communicator
  int rank = -1;
  int size = 0;
  int device = -1;
  std::string state;                 // "live", "destroyed", "aborted"
  std::optional<uint64_t> last_issued_seq;     // none when no collective was issued
  std::optional<uint64_t> last_completed_seq;  // none when none completed (or none was timed)
  // NCCL's own id of the communicator (commHash, 16 hex digits): what the profiler plugin's
  // init and NCCL's memory know it by. Empty when the watchdog could not tie it.
  std::string nccl_id;
  std::string address;               // the ncclComm_t, "0x..." (for a debugger)
};

// Where one network connection's proxy got (NCCL profiler ProxyOp/ProxyStep events;
// watchdog/metrics/proxy_progress.h). Steps by stage: send posted, filled, sent, done;
// recv posted, arrived, delivered, done.
inline constexpr int kSnapshotProxyStages = 4;
struct SnapshotProxyConnection {
  std::string nccl_comm;             // comms[].nccl_id
  int rank = -1;                     // this process's rank in the communicator
  int nranks = 0;
  int channel = 0;
  int peer = -1;                     // the remote rank, in the communicator
  std::string dir;                   // "send" or "recv"
  uint64_t ops = 0;                  // proxy operations started
  uint64_t ops_done = 0;
  uint64_t untracked_ops = 0;        // started while all op records were busy: their steps are not counted
  std::array<uint64_t, kSnapshotProxyStages> steps{};
  std::array<std::optional<double>, kSnapshotProxyStages> moved_s_ago{};  // none: never
};

// Kernels started and stopped on one channel of a communicator (KernelCh events).
struct SnapshotKernelChannel {
  std::string nccl_comm;
  int channel = 0;
  uint64_t started = 0;
  uint64_t stopped = 0;
  std::optional<double> started_s_ago;
  std::optional<double> stopped_s_ago;
};

struct SnapshotProgress {
  uint64_t plugin_inits = 0;         // communicators NCCL initialised the profiler plugin for
  std::vector<SnapshotProxyConnection> connections;
  std::vector<SnapshotKernelChannel> kernel_channels;
  uint64_t dropped_connections = 0;  // beyond the table's capacity: not reported
  uint64_t dropped_kernel_channels = 0;
};

// The names of a direction's stages in the snapshot, in stage order.
const std::array<const char*, kSnapshotProxyStages>& proxyStageNames(const std::string& dir);
// The stage a name means, for either direction; -1 when it is none.
int proxyStageIndex(std::string_view name);

struct SnapshotPendingOp {
  std::string op;                    // "ncclAllReduce", "cublasGemmEx", "kernel:<name>"
  std::string op_class;              // "collective", "p2p", "gemm", "kernel", "memcpy"
  std::string comm;                  // hash hex, empty when not a communication op
  std::optional<uint64_t> seq;
  uint64_t bytes = 0;
  std::string dtype;
  uint64_t count = 0;
  std::optional<int> peer;
  double age_s = 0;                  // since it became the oldest pending op of its stream
  double issued_s_ago = 0;           // since the host issued it
  bool gpu_started = false;
};

struct SnapshotStream {
  // As hex: a created stream's handle; stream 0 of device d is d << 8, and a per-thread
  // stream (cudaStreamPerThread) has bit 63 set (watchdog/stream_identity.h).
  std::string stream;
  std::optional<int> device;         // the device the stream (and its events) belong to
  std::vector<SnapshotPendingOp> pending;  // oldest first
};

// A thread blocked inside an NCCL host call (init, group end, a blocking collective).
struct SnapshotHostCall {
  std::string call;
  int64_t tid = 0;
  std::string thread_name;
  double age_s = 0;
  std::string comm;
  std::optional<uint64_t> seq;
};

struct WatchdogHealth {
  uint64_t failures_logged = 0;
  uint64_t ops_timed = 0;
  uint64_t ops_completed = 0;
  uint64_t events_exhausted = 0;     // operations left untimed because the event pool was empty
  uint64_t ops_dropped = 0;          // operations left untimed because the issue queue was full
};

struct WatchdogSnapshot {
  int schema_version = 1;
  double time_unix_s = 0;
  double timeout_s = 0;
  bool detected_here = false;        // this rank's detector fired (else it followed TRIGGER.json)
  SnapshotIdentity identity;
  std::optional<TriggerRecord> trigger;
  std::vector<SnapshotComm> comms;
  std::vector<SnapshotStream> streams;
  std::vector<SnapshotHostCall> host_calls;
  WatchdogHealth health;
  std::optional<SnapshotProgress> progress;  // none when the profiler plugin never ran here
};

nlohmann::json toJson(const WatchdogSnapshot& s);
// Tolerant reader: missing fields keep their defaults; wrong types are an error.
Expected<WatchdogSnapshot> watchdogSnapshotFromJson(const nlohmann::json& j);

}  // namespace hangwatch
