#pragma once
// ranks/rNNNNN.forensics.json (DESIGN.md §4, §5): what the collector found in one rank:
// every thread's merged stack, ring progress per communicator/channel, and how each
// collection phase went, so a report can tell "no data" from "this phase failed".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/schema/field_list.h"
#include "hangwatch/common/stack_frame.h"

namespace hangwatch {

// Where a network connection's proxy thread stands in the operation it is running: NCCL's
// ncclProxySubArgs (steps relative to `base`; NET only, read from host memory).
struct RingProxyProgress {
  uint64_t base = 0;         // the connection's step where this operation began (chunk-aligned)
  uint64_t nsteps = 0;       // steps of the operation on this connection
  uint64_t posted = 0;       // send: slots offered to the GPU; recv: receives posted to the network
  uint64_t received = 0;     // recv: arrived from the network
  uint64_t transmitted = 0;  // send: handed to the network; recv: handed to the GPU
  uint64_t done = 0;         // send: network sends complete; recv: consumed by the GPU
};

// The NIC that carries a NET connection at this end, as NCCL's host state says: the proxy
// connection's net device (send/recvNetResources.netDev) and the net's name and port for it
// (NCCL's IB device table, or its socket interfaces). Absent for connections inside a node.
struct RingNic {
  int index = -1;           // NCCL's net device index; -1 (null in JSON): not read
  std::string device;       // "mlx5_3", "eth0"; empty (null): the reader could not name it
  std::optional<int> port;  // the IB port; none for sockets or where not read
};

// One side of a ring connection where a channel stopped (DESIGN.md §5); the exact
// counter semantics are in gdb-scripts/README.md. A value a reader could not see is null
// in JSON: -1 for a peer, a *_known flag false for a counter (whose 0 is then no data).
struct RingConnection {
  int peer = -1;
  uint64_t target_step = 0;    // the step the waiting side needs
  uint64_t observed_step = 0;  // the peer's counter as last read
  bool waiting = false;        // a thread is blocked on this side (else read from memory)
  std::optional<uint64_t> base_step;    // the counter when this collective began here
  std::optional<uint64_t> posted_step;  // send side: steps this rank has written
  bool target_known = true;
  bool observed_known = true;
  std::string transport;       // NCCL's name of the link's transport ("P2P", "SHM", "NET"); empty: not read
  std::string counter_memory;  // where the observed counter lives: "host" or "device"; empty: not read
  std::optional<RingProxyProgress> proxy;
  std::optional<RingNic> nic;  // NET connections whose reader saw the NIC
  // In RingProgress::connections: "recv" (data from `peer`) or "send" (to it), and the
  // connection's place on the algorithm's graph: "ring-prev", "ring-next", "tree-parent",
  // "tree-child", "pat", "p2p". Empty in recv/send, whose key says the direction.
  std::string direction;
  std::string role;
};

// Steps of the current collective the connection's counter shows. Counters are absolute
// across collectives (gdb-scripts/README.md), so where this collective began is subtracted
// when the record says; without a base, or with one past the counter, the count itself stands.
// gdb-scripts/hangwatch_gdb/ring_records.py progress() is the same rule.
inline uint64_t ringProgress(const RingConnection& c) {
  if (c.base_step && c.observed_step >= *c.base_step) return c.observed_step - *c.base_step;
  return c.observed_step;
}

// A thread blocked in the collective, and where.
struct RingWaiter {
  int64_t tid = 0;
  std::string name;
  std::string function;   // e.g. "simnccl_wait_peer"
  std::string direction;  // "recv", "send", or empty (a stalled device)
};

// The step that arrived on the recv side belongs to another collective.
struct RingMismatch {
  uint64_t arrived_seq = 0;
  std::string arrived_op;
};

struct RingProgress {
  std::string comm;  // communicator hash as hex, the watchdog snapshot's comms[].hash
  // NCCL's own id of the communicator (its commHash, hex), when the reader saw it: joins
  // through the snapshot's comms[].nccl_id where `comm` could not be computed.
  std::string nccl_comm;
  std::string op;    // "ncclAllReduce", ...; empty when not known
  uint64_t seq = 0;
  bool seq_known = true;  // false: null in JSON, the reader could not tell (seq 0 is then no data)
  // Ranks and channel: -1 when the reader could not tell (null in JSON).
  int channel = 0;
  int rank = 0;  // rank in this communicator; prev/next are too
  int prev = -1;
  int next = -1;
  std::optional<RingConnection> recv;
  std::optional<RingConnection> send;
  // Every connection of the channel the operation uses, on the algorithm's own graph (a ring's
  // prev and next, a tree's parent and children, PAT's peers), each with its direction and
  // role: what the verdict reads for algorithms other than RING. Empty when the reader saw
  // only the connection(s) in recv/send.
  std::vector<RingConnection> connections;
  std::optional<int> comm_rank;
  std::optional<int> comm_size;
  std::string algorithm;  // "RING", ...
  std::string protocol;   // "SIMPLE", "LL", "LL128"
  std::string source;     // "sim-frame", "cuda-registers", "nccl-host"
  bool stalled = false;   // kept for old dumps; no debugger can read it on a GPU, so no verdict uses it
  std::optional<RingMismatch> mismatch;
  std::vector<RingWaiter> waiting_threads;
  // NCCL's own index of the operation on the communicator's shared resources (its proxy
  // args' opCount / 2), when a proxy operation was seen: equals `seq` only for a
  // communicator that shares no resources and whose collectives all went through a proxy.
  std::optional<uint64_t> nccl_op_count;
};

// One collection phase ("proc", "ptrace", "python", "debugger"), timed.
struct CollectionPhase {
  std::string name;
  double seconds = 0;
  bool ok = false;
  std::string error;  // empty when ok; "skipped: ..." when the phase did not run
};

// What NCCL's RAS said of one communicator when the collector asked it (NCCL 2.24+: a
// thread in every NCCL process keeps the job's processes networked with keepalives; its
// client service answers STATUS on NCCL_RAS_ADDR, localhost:28028 by default, JSON since
// 2.28: src/ras/client_support.cc, jsonStartCommunicator and jsonWriteMissingRank). Only
// what the verdict reads is kept.
struct RasMember {
  int rank = -1;   // the communicator's rank
  std::string host;
  int64_t pid = -1;
  int cuda_dev = -1;
  bool unresponsive = false;     // missing: its process did not answer RAS's collective
  bool considered_dead = false;  // missing: unreachable for 60 s (RAS_PEER_DEAD_TIMEOUT)
};

struct RasComm {
  std::string hash;  // NCCL's commHash, "0x..." as RAS prints it
  int size = 0;
  std::vector<RasMember> ranks;    // members whose process answered
  std::vector<RasMember> missing;  // members RAS has no data from
};

// One question to RAS: where it was asked, when, and what came back (or why nothing did).
struct RasStatus {
  std::string address;  // host:port asked
  // Who asked: "collector" (before it stopped anything) or "ras-command" (`forensics ras`, which
  // the rank's watchdog starts with HANGWATCH_COLLECT=0). Empty in dumps older than the field: the collector.
  std::string asked_by;
  double time_unix_s = 0;
  double seconds = 0;   // how long the answer took
  std::string error;    // empty when it answered; else why not, as a sentence
  std::vector<RasComm> communicators;
};

struct ForensicsDump {
  int schema_version = 1;
  std::optional<int> rank;
  int64_t pid = 0;
  std::string host;
  std::string exe;
  std::vector<std::string> cmdline;
  std::string process_state;   // /proc/<pid>/status State at capture, e.g. "S (sleeping)"
  double time_unix_s = 0;
  std::string backend_requested;  // auto|cuda|sim|host
  std::string backend;            // what ran: "host", "sim", "cuda"
  std::string unwinder;           // e.g. "libdwfl", or "proc-only" when ptrace failed
  std::string debugger;           // path of the debugger used, empty when none ran
  std::string python_version;     // empty when the process has no CPython (or it was not read)
  std::vector<ThreadStack> threads;
  std::vector<RingProgress> ring_progress;
  std::vector<CollectionPhase> phases;
  std::vector<std::string> errors;  // every failure, as a sentence for the report
  // The phase during which the process exited (a launcher killed it): the dump holds what
  // was taken before. Empty while the process lived through the whole collection.
  std::string target_exited_during;
  // NCCL's RAS asked before any thread was stopped, by the collector of the lowest rank of
  // its node (one question per node); absent when not asked.
  std::optional<RasStatus> ras;
};

// ranks/rNNNNN.ras.json: NCCL's RAS asked for a rank's node by `forensics ras`, which the
// rank's watchdog starts when no collector runs (HANGWATCH_COLLECT=0). A collector's dump
// carries its question itself (ForensicsDump::ras).
struct RasAnswer {
  int schema_version = 1;
  int rank = -1;  // the rank whose process's RAS address was asked
  int64_t pid = 0;
  std::string host;
  RasStatus ras;
};

nlohmann::json toJson(const RasAnswer& a);
Expected<RasAnswer> rasAnswerFromText(const std::string& text);

nlohmann::json toJson(const RingProgress& r);
Expected<RingProgress> ringProgressFromJson(const nlohmann::json& j);
nlohmann::json toJson(const ForensicsDump& d);
// The nlohmann reader of a whole dump: the reference dumpio's fast reader is tested and
// benchmarked against (the report reads dumps with that one).
Expected<ForensicsDump> forensicsDumpFromText(const std::string& text);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<RingProxyProgress> {
  static constexpr const char* what = "proxy";
  static constexpr auto fields = std::tuple{
      field("base", &RingProxyProgress::base, "proxy base"),
      field("nsteps", &RingProxyProgress::nsteps, "proxy nsteps"),
      field("posted", &RingProxyProgress::posted, "proxy posted"),
      field("received", &RingProxyProgress::received, "proxy received"),
      field("transmitted", &RingProxyProgress::transmitted, "proxy transmitted"),
      field("done", &RingProxyProgress::done, "proxy done"),
  };
};

template <>
struct Schema<RingNic> {
  static constexpr const char* what = "nic";
  static constexpr auto fields = std::tuple{
      rankField("index", &RingNic::index, "nic index"),
      field("device", &RingNic::device, "nic device", Empty::kNull),
      field("port", &RingNic::port, "nic port"),
  };
};

template <>
struct Schema<RingConnection> {
  static constexpr const char* what = "connection";
  static constexpr auto fields = std::tuple{
      rankField("peer", &RingConnection::peer, "peer"),
      knownField("target_step", &RingConnection::target_step, &RingConnection::target_known, "target_step"),
      knownField("observed_step", &RingConnection::observed_step, &RingConnection::observed_known, "observed_step"),
      field("waiting", &RingConnection::waiting, "waiting"),
      field("base_step", &RingConnection::base_step, "base_step"),
      field("posted_step", &RingConnection::posted_step, "posted_step"),
      field("transport", &RingConnection::transport, "transport", Empty::kOmit),
      field("counter_memory", &RingConnection::counter_memory, "counter_memory", Empty::kOmit),
      field("proxy", &RingConnection::proxy, "proxy", Empty::kOmit),
      field("nic", &RingConnection::nic, "nic", Empty::kOmit),
      field("direction", &RingConnection::direction, "direction", Empty::kOmit),
      field("role", &RingConnection::role, "role", Empty::kOmit),
  };
  // What a record does not say, the reader did not see.
  static RingConnection initial() {
    RingConnection c;
    c.target_known = c.observed_known = false;
    return c;
  }
};

template <>
struct Schema<RingMismatch> {
  static constexpr const char* what = "mismatch";
  static constexpr auto fields = std::tuple{
      field("arrived_seq", &RingMismatch::arrived_seq, "arrived_seq"),
      field("arrived_op", &RingMismatch::arrived_op, "arrived_op"),
  };
};

template <>
struct Schema<RingWaiter> {
  static constexpr const char* what = "waiting thread";
  static constexpr auto fields = std::tuple{
      field("tid", &RingWaiter::tid, "tid"),
      field("name", &RingWaiter::name, "name"),
      field("function", &RingWaiter::function, "function"),
      field("direction", &RingWaiter::direction, "direction", Empty::kNull),
  };
};

template <>
struct Schema<RingProgress> {
  static constexpr const char* what = "ring_progress";
  static constexpr auto fields = std::tuple{
      field("comm", &RingProgress::comm, "comm"),
      field("nccl_comm", &RingProgress::nccl_comm, "nccl_comm", Empty::kOmit),
      field("op", &RingProgress::op, "op"),
      knownField("seq", &RingProgress::seq, &RingProgress::seq_known, "seq"),
      rankField("channel", &RingProgress::channel, "channel"),
      rankField("rank", &RingProgress::rank, "rank"),
      rankField("prev", &RingProgress::prev, "prev"),
      rankField("next", &RingProgress::next, "next"),
      field("recv", &RingProgress::recv, "recv"),
      field("send", &RingProgress::send, "send"),
      field("connections", &RingProgress::connections, "connections", Empty::kOmit),
      field("comm_rank", &RingProgress::comm_rank, "comm_rank"),
      field("comm_size", &RingProgress::comm_size, "comm_size"),
      field("algorithm", &RingProgress::algorithm, "algorithm"),
      field("protocol", &RingProgress::protocol, "protocol"),
      field("source", &RingProgress::source, "source"),
      field("stalled", &RingProgress::stalled, "stalled"),
      field("mismatch", &RingProgress::mismatch, "mismatch"),
      field("waiting_threads", &RingProgress::waiting_threads, "waiting_threads"),
      field("nccl_op_count", &RingProgress::nccl_op_count, "nccl_op_count", Empty::kOmit),
  };
  static RingProgress initial() {
    RingProgress r;
    r.seq_known = false;
    r.channel = r.rank = -1;
    return r;
  }
};

template <>
struct Schema<CollectionPhase> {
  static constexpr const char* what = "phase";
  static constexpr auto fields = std::tuple{
      field("name", &CollectionPhase::name, "phase name"),
      field("seconds", &CollectionPhase::seconds, "seconds"),
      field("ok", &CollectionPhase::ok, "ok"),
      field("error", &CollectionPhase::error, "phase error", Empty::kNull),
  };
};

template <>
struct Schema<RasMember> {
  static constexpr const char* what = "ras member";
  static constexpr auto fields = std::tuple{
      field("rank", &RasMember::rank, "ras rank"),
      field("host", &RasMember::host, "ras host"),
      field("pid", &RasMember::pid, "ras pid"),
      field("cuda_dev", &RasMember::cuda_dev, "ras cuda_dev"),
      field("unresponsive", &RasMember::unresponsive, "ras unresponsive", Empty::kOmit),
      field("considered_dead", &RasMember::considered_dead, "ras considered_dead", Empty::kOmit),
  };
};

template <>
struct Schema<RasComm> {
  static constexpr const char* what = "ras communicator";
  static constexpr auto fields = std::tuple{
      field("hash", &RasComm::hash, "ras hash"),
      field("size", &RasComm::size, "ras size"),
      field("ranks", &RasComm::ranks, "ras ranks"),
      field("missing_ranks", &RasComm::missing, "ras missing_ranks"),
  };
};

template <>
struct Schema<RasStatus> {
  static constexpr const char* what = "ras";
  static constexpr auto fields = std::tuple{
      field("address", &RasStatus::address, "ras address"),
      field("asked_by", &RasStatus::asked_by, "ras asked_by", Empty::kOmit),
      field("time_unix_s", &RasStatus::time_unix_s, "ras time_unix_s"),
      field("seconds", &RasStatus::seconds, "ras seconds"),
      field("error", &RasStatus::error, "ras error", Empty::kOmit),
      field("communicators", &RasStatus::communicators, "ras communicators"),
  };
};

template <>
struct Schema<RasAnswer> {
  static constexpr const char* what = "ras answer";
  static constexpr auto fields = std::tuple{
      field("schema_version", &RasAnswer::schema_version, "schema_version"),
      field("rank", &RasAnswer::rank, "rank"),
      field("pid", &RasAnswer::pid, "pid"),
      field("host", &RasAnswer::host, "host"),
      field("ras", &RasAnswer::ras, "ras"),
  };
};

template <>
struct Schema<ForensicsDump> {
  static constexpr const char* what = "forensics dump";
  static constexpr auto fields = std::tuple{
      field("schema_version", &ForensicsDump::schema_version, "schema_version"),
      field("rank", &ForensicsDump::rank, "rank"),
      field("pid", &ForensicsDump::pid, "pid"),
      field("host", &ForensicsDump::host, "host"),
      field("exe", &ForensicsDump::exe, "exe"),
      field("cmdline", &ForensicsDump::cmdline, "cmdline"),
      field("process_state", &ForensicsDump::process_state, "process_state"),
      field("time_unix_s", &ForensicsDump::time_unix_s, "time_unix_s"),
      field("backend_requested", &ForensicsDump::backend_requested, "backend_requested"),
      field("backend", &ForensicsDump::backend, "backend"),
      field("unwinder", &ForensicsDump::unwinder, "unwinder"),
      field("debugger", &ForensicsDump::debugger, "debugger"),
      field("python_version", &ForensicsDump::python_version, "python_version"),
      field("threads", &ForensicsDump::threads, "threads"),
      field("ring_progress", &ForensicsDump::ring_progress, "ring_progress"),
      field("phases", &ForensicsDump::phases, "phases"),
      field("errors", &ForensicsDump::errors, "errors"),
      field("target_exited_during", &ForensicsDump::target_exited_during, "target_exited_during", Empty::kNull),
      field("ras", &ForensicsDump::ras, "ras", Empty::kOmit),
  };
};

}  // namespace hangwatch::schema
