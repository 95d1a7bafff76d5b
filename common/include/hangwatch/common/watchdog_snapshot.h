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
#include "hangwatch/common/schema/field_list.h"
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

// A collective this rank issued on a communicator: the arguments every member must call it
// with (NCCL checks none of them across ranks).
struct SnapshotIssuedOp {
  uint64_t seq = 0;
  std::string op;                    // "ncclAllReduce", ...
  uint64_t count = 0;
  std::string dtype;
  std::optional<int> root;           // Broadcast, Reduce, Gather, Scatter
};

// Sends and receives this rank issued to one peer of a communicator (its comm rank).
struct SnapshotP2pPeer {
  int peer = -1;
  uint64_t sends = 0;
  uint64_t receives = 0;
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
  // The last collectives issued on it (at most kRecentKept), oldest first; absent in dumps
  // from before 2026-11-29.
  static constexpr size_t kRecentKept = 16;
  std::vector<SnapshotIssuedOp> recent;
  // Sends and receives issued on it, per peer (at most kP2pPeersKept, in the order first
  // talked to; the rest counted in p2p_untracked); absent in dumps from before 2026-11-29.
  static constexpr size_t kP2pPeersKept = 8;
  std::vector<SnapshotP2pPeer> p2p;
  uint64_t p2p_untracked = 0;
  // What NCCL's ncclCommGetAsyncError answered when the snapshot was taken, when it was an
  // error: "ncclRemoteError" is NCCL's proxy failing on a network peer that closed its
  // connection or stopped answering. Empty when none, or not asked (a communicator ended or
  // not ready); absent in dumps from before 2026-11-29.
  std::string async_error;
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

// The collectives NCCL launched on one communicator with one algorithm (Coll events'
// `algo`: TREE, RING, COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE, PAT, or "other").
struct SnapshotCollAlgorithm {
  std::string nccl_comm;
  std::string algo;
  uint64_t launched = 0;
  std::optional<double> last_s_ago;  // since the last one was launched
};

struct SnapshotProgress {
  uint64_t plugin_inits = 0;         // communicators NCCL initialised the profiler plugin for
  std::vector<SnapshotProxyConnection> connections;
  std::vector<SnapshotKernelChannel> kernel_channels;
  std::vector<SnapshotCollAlgorithm> algorithms;  // absent in dumps from before 2026-11-26
  uint64_t dropped_connections = 0;  // beyond the table's capacity: not reported
  uint64_t dropped_kernel_channels = 0;
  uint64_t dropped_comms = 0;        // communicators whose algorithms did not fit
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
  // The device of the op's stream. The snapshot says it once per stream; the report's flat list
  // of a rank's ops (RankRecord::pending) keeps it per op, to tell a process's GPUs apart.
  std::optional<int> device;
};

struct SnapshotStream {
  // As hex: a created stream's handle; stream 0 of device d is d << 8, and a per-thread
  // stream (cudaStreamPerThread) has bit 63 set (watchdog/stream_identity.h).
  std::string stream;
  std::optional<int> device;         // the device the stream (and its events) belong to
  std::vector<SnapshotPendingOp> pending;  // oldest first
};

// A thread blocked inside an NCCL host call (init, group end, a blocking collective).
// The communicator an init call was forming when the snapshot was taken: `comm` is the hash
// its comms[].hash would have, `rank` this process's rank in it, `size` its member count.
struct SnapshotJoining {
  std::string comm;
  int rank = -1;
  int size = 0;
};

struct SnapshotHostCall {
  std::string call;
  int64_t tid = 0;
  std::string thread_name;
  double age_s = 0;
  std::string comm;
  std::optional<uint64_t> seq;
  std::optional<SnapshotJoining> joining;  // only for ncclCommInitRank*
};

struct WatchdogHealth {
  uint64_t failures_logged = 0;
  uint64_t ops_timed = 0;
  uint64_t ops_completed = 0;
  uint64_t events_exhausted = 0;     // operations left untimed because the event pool was empty
  uint64_t ops_dropped = 0;          // operations left untimed because the issue queue was full
};

// A snapshot taken at an early warning (ranks/rNNNNN.suspect.json): which warning, and
// whether this rank moved again since.
struct SuspectState {
  int episode = 1;                         // 1: SUSPECT.json, n: SUSPECT.<n>.json
  std::optional<double> resumed_after_s;   // seconds from the warning until this rank's GPU work moved again
};

// NCCL's own INFO lines that say which NIC each network connection uses, from the file NCCL
// writes them to (NCCL_DEBUG=INFO with NCCL_DEBUG_FILE; watchdog/nccl_info_log.h): the net's
// devices ("NET/IB : Using [0]mlx5_0:1/IB ..."), each communicator's init ("... commId 0x... -
// Init START") and each connection's net device ("Channel 02/0 : 3[3] -> 4[0] [send] via
// NET/IB/3"), as NCCL printed them, this process's only. The report parses them
// (analyzer/verdict/nccl_info_lines.h).
struct SnapshotNcclLog {
  static constexpr size_t kLinesKept = 4096;
  std::string file;                // the file read; empty when none was
  std::string unread;              // why no line could be read (NCCL_DEBUG=WARN, ...); empty when read
  std::vector<std::string> lines;  // oldest first, at most kLinesKept
  uint64_t lines_dropped = 0;      // matching lines beyond kLinesKept
  bool truncated = false;          // the file was longer than the watchdog reads
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
  // The unique ids this process made with ncclGetUniqueId (the hash `joining.comm` holds), the
  // last kUniqueIdsKept: a full list may have lost older ones.
  static constexpr size_t kUniqueIdsKept = 64;
  std::vector<std::string> unique_ids_made;
  WatchdogHealth health;
  std::optional<SnapshotProgress> progress;  // none when the profiler plugin never ran here
  std::optional<SuspectState> suspect;       // only in a suspect snapshot
  // None where the watchdog had no NCCL log to read (NCCL never ran, or HANGWATCH_NCCL_INFO=0);
  // absent in dumps from before 2026-12-01.
  std::optional<SnapshotNcclLog> nccl_log;
};

nlohmann::json toJson(const WatchdogSnapshot& s);
// Tolerant reader: missing fields keep their defaults; wrong types are an error.
Expected<WatchdogSnapshot> watchdogSnapshotFromJson(const nlohmann::json& j);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<SnapshotIdentity> {
  static constexpr const char* what = "identity";
  static constexpr auto fields = std::tuple{
      field("rank", &SnapshotIdentity::rank, "identity rank"),
      field("local_rank", &SnapshotIdentity::local_rank, "identity local_rank"),
      field("world_size", &SnapshotIdentity::world_size, "identity world_size"),
      field("rank_source", &SnapshotIdentity::rank_source, "identity rank_source"),
      field("host", &SnapshotIdentity::host, "identity host"),
      field("pid", &SnapshotIdentity::pid, "identity pid"),
      field("job_id", &SnapshotIdentity::job_id, "identity job_id"),
      field("device", &SnapshotIdentity::device, "identity device"),
      field("cuda_visible_devices", &SnapshotIdentity::cuda_visible_devices, "identity cuda_visible_devices"),
  };
};

template <>
struct Schema<SnapshotIssuedOp> {
  static constexpr const char* what = "issued op";
  static constexpr auto fields = std::tuple{
      field("seq", &SnapshotIssuedOp::seq, "issued seq"),
      field("op", &SnapshotIssuedOp::op, "issued op"),
      field("count", &SnapshotIssuedOp::count, "issued count"),
      field("dtype", &SnapshotIssuedOp::dtype, "issued dtype"),
      field("root", &SnapshotIssuedOp::root, "issued root"),
  };
};

template <>
struct Schema<SnapshotP2pPeer> {
  static constexpr const char* what = "p2p peer";
  static constexpr auto fields = std::tuple{
      field("peer", &SnapshotP2pPeer::peer, "p2p peer"),
      field("sends", &SnapshotP2pPeer::sends, "p2p sends"),
      field("receives", &SnapshotP2pPeer::receives, "p2p receives"),
  };
};

template <>
struct Schema<SnapshotComm> {
  static constexpr const char* what = "comm";
  static constexpr auto fields = std::tuple{
      field("hash", &SnapshotComm::hash, "comm hash"),
      field("rank", &SnapshotComm::rank, "comm rank"),
      field("size", &SnapshotComm::size, "comm size"),
      field("device", &SnapshotComm::device, "comm device"),
      field("state", &SnapshotComm::state, "comm state"),
      field("last_issued_seq", &SnapshotComm::last_issued_seq, "last_issued_seq"),
      field("last_completed_seq", &SnapshotComm::last_completed_seq, "last_completed_seq"),
      field("nccl_id", &SnapshotComm::nccl_id, "comm nccl_id", Empty::kNull),
      field("address", &SnapshotComm::address, "comm address"),
      field("recent", &SnapshotComm::recent, "comm recent"),
      field("p2p", &SnapshotComm::p2p, "comm p2p"),
      field("p2p_untracked", &SnapshotComm::p2p_untracked, "comm p2p_untracked"),
      field("async_error", &SnapshotComm::async_error, "comm async_error", Empty::kOmit),
  };
};

// A connection's steps and last-moved times, keyed by the stage names of its direction.
struct ProxyStepsCodec {
  static void write(nlohmann::json& out, const SnapshotProxyConnection& c);
  static void read(const nlohmann::json& v, SnapshotProxyConnection& c, const char* what);
};
struct ProxyMovedCodec {
  static void write(nlohmann::json& out, const SnapshotProxyConnection& c);
  static void read(const nlohmann::json& v, SnapshotProxyConnection& c, const char* what);
};

template <>
struct Schema<SnapshotProxyConnection> {
  static constexpr const char* what = "progress connection";
  static constexpr auto fields = std::tuple{
      field("nccl_comm", &SnapshotProxyConnection::nccl_comm, "connection nccl_comm"),
      field("rank", &SnapshotProxyConnection::rank, "connection rank"),
      field("nranks", &SnapshotProxyConnection::nranks, "connection nranks"),
      field("channel", &SnapshotProxyConnection::channel, "connection channel"),
      field("peer", &SnapshotProxyConnection::peer, "connection peer"),
      field("dir", &SnapshotProxyConnection::dir, "connection dir"),
      field("ops", &SnapshotProxyConnection::ops, "connection ops"),
      field("ops_done", &SnapshotProxyConnection::ops_done, "connection ops_done"),
      field("untracked_ops", &SnapshotProxyConnection::untracked_ops, "connection untracked_ops"),
      customField<ProxyStepsCodec, SnapshotProxyConnection>("steps", "steps"),
      customField<ProxyMovedCodec, SnapshotProxyConnection>("moved_s_ago", "moved_s_ago"),
  };
};

template <>
struct Schema<SnapshotKernelChannel> {
  static constexpr const char* what = "kernel channel";
  static constexpr auto fields = std::tuple{
      field("nccl_comm", &SnapshotKernelChannel::nccl_comm, "kernel channel nccl_comm"),
      field("channel", &SnapshotKernelChannel::channel, "kernel channel"),
      field("started", &SnapshotKernelChannel::started, "kernel channel started"),
      field("stopped", &SnapshotKernelChannel::stopped, "kernel channel stopped"),
      field("started_s_ago", &SnapshotKernelChannel::started_s_ago, "started_s_ago"),
      field("stopped_s_ago", &SnapshotKernelChannel::stopped_s_ago, "stopped_s_ago"),
  };
};

template <>
struct Schema<SnapshotCollAlgorithm> {
  static constexpr const char* what = "collective algorithm";
  static constexpr auto fields = std::tuple{
      field("nccl_comm", &SnapshotCollAlgorithm::nccl_comm, "algorithm nccl_comm"),
      field("algo", &SnapshotCollAlgorithm::algo, "algo"),
      field("launched", &SnapshotCollAlgorithm::launched, "algorithm launched"),
      field("last_s_ago", &SnapshotCollAlgorithm::last_s_ago, "algorithm last_s_ago"),
  };
};

template <>
struct Schema<SnapshotProgress> {
  static constexpr const char* what = "progress";
  static constexpr auto fields = std::tuple{
      field("plugin_inits", &SnapshotProgress::plugin_inits, "plugin_inits"),
      field("connections", &SnapshotProgress::connections, "connections"),
      field("kernel_channels", &SnapshotProgress::kernel_channels, "kernel_channels"),
      field("algorithms", &SnapshotProgress::algorithms, "algorithms"),
      field("dropped_connections", &SnapshotProgress::dropped_connections, "dropped_connections"),
      field("dropped_kernel_channels", &SnapshotProgress::dropped_kernel_channels, "dropped_kernel_channels"),
      field("dropped_comms", &SnapshotProgress::dropped_comms, "dropped_comms"),
  };
};

template <>
struct Schema<SnapshotPendingOp> {
  static constexpr const char* what = "pending op";
  static constexpr auto fields = std::tuple{
      field("op", &SnapshotPendingOp::op, "pending op"),
      field("class", &SnapshotPendingOp::op_class, "pending class"),
      field("comm", &SnapshotPendingOp::comm, "pending comm"),
      field("seq", &SnapshotPendingOp::seq, "pending seq"),
      field("bytes", &SnapshotPendingOp::bytes, "pending bytes"),
      field("dtype", &SnapshotPendingOp::dtype, "pending dtype"),
      field("count", &SnapshotPendingOp::count, "pending count"),
      field("peer", &SnapshotPendingOp::peer, "pending peer"),
      field("age_s", &SnapshotPendingOp::age_s, "pending age_s"),
      field("issued_s_ago", &SnapshotPendingOp::issued_s_ago, "pending issued_s_ago"),
      field("gpu_started", &SnapshotPendingOp::gpu_started, "pending gpu_started"),
      field("device", &SnapshotPendingOp::device, "pending device", Empty::kOmit),
  };
};

template <>
struct Schema<SnapshotStream> {
  static constexpr const char* what = "stream";
  static constexpr auto fields = std::tuple{
      field("stream", &SnapshotStream::stream, "stream handle"),
      field("device", &SnapshotStream::device, "stream device"),
      field("pending", &SnapshotStream::pending, "pending"),
  };
};

template <>
struct Schema<SnapshotJoining> {
  static constexpr const char* what = "joining";
  static constexpr auto fields = std::tuple{
      field("comm", &SnapshotJoining::comm, "joining comm"),
      field("rank", &SnapshotJoining::rank, "joining rank"),
      field("size", &SnapshotJoining::size, "joining size"),
  };
};

template <>
struct Schema<SnapshotHostCall> {
  static constexpr const char* what = "host call";
  static constexpr auto fields = std::tuple{
      field("call", &SnapshotHostCall::call, "host call"),
      field("tid", &SnapshotHostCall::tid, "host call tid"),
      field("thread_name", &SnapshotHostCall::thread_name, "host call thread_name"),
      field("age_s", &SnapshotHostCall::age_s, "host call age_s"),
      field("comm", &SnapshotHostCall::comm, "host call comm"),
      field("seq", &SnapshotHostCall::seq, "host call seq"),
      field("joining", &SnapshotHostCall::joining, "host call joining"),
  };
};

template <>
struct Schema<WatchdogHealth> {
  static constexpr const char* what = "health";
  static constexpr auto fields = std::tuple{
      field("failures_logged", &WatchdogHealth::failures_logged, "failures_logged"),
      field("ops_timed", &WatchdogHealth::ops_timed, "ops_timed"),
      field("ops_completed", &WatchdogHealth::ops_completed, "ops_completed"),
      field("events_exhausted", &WatchdogHealth::events_exhausted, "events_exhausted"),
      field("ops_dropped", &WatchdogHealth::ops_dropped, "ops_dropped"),
  };
};

template <>
struct Schema<SuspectState> {
  static constexpr const char* what = "suspect";
  static constexpr auto fields = std::tuple{
      field("episode", &SuspectState::episode, "suspect episode"),
      field("resumed_after_s", &SuspectState::resumed_after_s, "suspect resumed_after_s"),
  };
};

template <>
struct Schema<SnapshotNcclLog> {
  static constexpr const char* what = "nccl log";
  static constexpr auto fields = std::tuple{
      field("file", &SnapshotNcclLog::file, "nccl_log file", Empty::kNull),
      field("unread", &SnapshotNcclLog::unread, "nccl_log unread", Empty::kOmit),
      field("lines", &SnapshotNcclLog::lines, "nccl_log lines"),
      field("lines_dropped", &SnapshotNcclLog::lines_dropped, "nccl_log lines_dropped"),
      field("truncated", &SnapshotNcclLog::truncated, "nccl_log truncated"),
  };
};

template <>
struct Schema<WatchdogSnapshot> {
  static constexpr const char* what = "watchdog snapshot";
  static constexpr auto fields = std::tuple{
      field("schema_version", &WatchdogSnapshot::schema_version, "schema_version"),
      field("time_unix_s", &WatchdogSnapshot::time_unix_s, "time_unix_s"),
      field("timeout_s", &WatchdogSnapshot::timeout_s, "timeout_s"),
      field("detected_here", &WatchdogSnapshot::detected_here, "detected_here"),
      field("identity", &WatchdogSnapshot::identity, "identity"),
      field("trigger", &WatchdogSnapshot::trigger, "trigger"),
      field("comms", &WatchdogSnapshot::comms, "comms"),
      field("streams", &WatchdogSnapshot::streams, "streams"),
      field("host_calls", &WatchdogSnapshot::host_calls, "host_calls"),
      field("unique_ids_made", &WatchdogSnapshot::unique_ids_made, "unique_ids_made", Empty::kOmit),
      field("health", &WatchdogSnapshot::health, "health"),
      field("progress", &WatchdogSnapshot::progress, "progress"),
      field("suspect", &WatchdogSnapshot::suspect, "suspect", Empty::kOmit),
      field("nccl_log", &WatchdogSnapshot::nccl_log, "nccl_log", Empty::kOmit),
  };
};

}  // namespace hangwatch::schema
