#include "hangwatch/watchdog/snapshot_builder.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "hangwatch/watchdog/comm_identity.h"
#include "hangwatch/watchdog/hang_detector.h"
#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/metrics/op_key_table.h"

namespace hangwatch::watchdog {
namespace {

std::string threadName(pid_t tid) {
  std::ifstream in(fmt::format("/proc/self/task/{}/comm", tid));
  std::string name;
  std::getline(in, name);
  return name;
}

const char* stateName(CommState s) {
  switch (s) {
    case CommState::kLive: return "live";
    case CommState::kDestroyed: return "destroyed";
    case CommState::kAborted: return "aborted";
  }
  return "live";
}

std::optional<double> secondsAgo(int64_t then_ns, int64_t now_ns) {
  if (then_ns == 0) return std::nullopt;
  return std::max<int64_t>(0, now_ns - then_ns) * 1e-9;
}

SnapshotProgress buildProgress(const ProxyProgress& table, uint64_t inits, int64_t now_ns) {
  SnapshotProgress p;
  p.plugin_inits = inits;
  for (const ProxyConnection::View& v : table.connections()) {
    SnapshotProxyConnection c;
    c.nccl_comm = CommTable::hashHex(v.key.comm_id);
    c.rank = v.rank;
    c.nranks = v.nranks;
    c.channel = v.key.channel;
    c.peer = v.key.peer;
    c.dir = v.key.send ? "send" : "recv";
    c.ops = v.ops_started;
    c.ops_done = v.ops_done;
    c.untracked_ops = v.untracked_ops;
    for (int i = 0; i < kProxyStages; ++i) {
      c.steps[i] = v.steps[i];
      c.moved_s_ago[i] = secondsAgo(v.moved_ns[i], now_ns);
    }
    p.connections.push_back(std::move(c));
  }
  std::sort(p.connections.begin(), p.connections.end(), [](const auto& a, const auto& b) {
    return std::tie(a.nccl_comm, a.channel, a.peer, a.dir) < std::tie(b.nccl_comm, b.channel, b.peer, b.dir);
  });
  for (const ProxyProgress::KernelChannelView& k : table.kernelChannels())
    p.kernel_channels.push_back({CommTable::hashHex(k.comm_id), k.channel, k.started, k.stopped,
                                 secondsAgo(k.started_ns, now_ns), secondsAgo(k.stopped_ns, now_ns)});
  std::sort(p.kernel_channels.begin(), p.kernel_channels.end(), [](const auto& a, const auto& b) {
    return std::tie(a.nccl_comm, a.channel) < std::tie(b.nccl_comm, b.channel);
  });
  for (const ProxyProgress::AlgorithmView& a : table.algorithms())
    p.algorithms.push_back({CommTable::hashHex(a.comm_id), a.algo, a.launched, secondsAgo(a.last_ns, now_ns)});
  std::sort(p.algorithms.begin(), p.algorithms.end(), [](const auto& a, const auto& b) {
    return std::tie(a.nccl_comm, a.algo) < std::tie(b.nccl_comm, b.algo);
  });
  p.dropped_connections = table.droppedConnections();
  p.dropped_kernel_channels = table.droppedKernelChannels();
  p.dropped_comms = table.droppedComms();
  return p;
}

SnapshotIdentity identityOf(const SnapshotInputs& in) {
  SnapshotIdentity id;
  id.rank = snapshotRank(in.launcher, *in.comms);
  id.rank_source = in.launcher.rank ? in.launcher.source : (id.rank ? "communicator" : "");
  id.local_rank = in.launcher.local_rank;
  id.world_size = in.launcher.world_size;
  id.host = hostName();
  id.pid = ::getpid();
  id.job_id = in.job_id;
  id.device = in.device;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) id.cuda_visible_devices = v;
  return id;
}

static_assert(IssuedHistory::kKept == SnapshotComm::kRecentKept, "the snapshot says how many it keeps");
static_assert(P2pCounts::kPeers == SnapshotComm::kP2pPeersKept, "the snapshot says how many peers it keeps");

SnapshotComm commOf(const CommView& c, const std::map<uintptr_t, std::string>& async_errors) {
  SnapshotComm sc;
  sc.hash = CommTable::hashHex(c.hash);
  sc.rank = c.rank;
  sc.size = c.size;
  sc.device = c.device;
  sc.state = stateName(c.state);
  if (c.issued > 0) sc.last_issued_seq = c.issued - 1;
  if (c.completed_plus1 > 0) sc.last_completed_seq = c.completed_plus1 - 1;
  if (c.nccl_id != 0) sc.nccl_id = CommTable::hashHex(c.nccl_id);
  sc.address = hexId(c.handle);
  for (const IssuedOp& op : c.recent) {
    SnapshotIssuedOp& r = sc.recent.emplace_back();
    r.seq = op.seq;
    r.op = op.name;
    r.count = op.count;
    r.dtype = ncclDtypeName(op.dtype);
    if (op.root >= 0) r.root = op.root;
  }
  for (const P2pCounts::Peer& p : c.p2p) sc.p2p.push_back({p.peer, p.sends, p.receives});
  sc.p2p_untracked = c.p2p_untracked;
  if (auto e = async_errors.find(c.handle); c.state == CommState::kLive && e != async_errors.end())
    sc.async_error = e->second;
  return sc;
}

// `front`: only the front op is "waiting"; the ones behind it have not had their turn.
SnapshotPendingOp pendingOf(const PendingOp& op, bool front, const SnapshotInputs& in) {
  SnapshotPendingOp p;
  p.op = op.op.name;
  if (op.kernel_func && in.kernel_namer) {
    if (const char* n = in.kernel_namer(op)) p.op = fmt::format("kernel:{}", n);
  }
  p.op_class = pendingOpClassName(op.op.cls);
  if (op.op.comm_hash) p.comm = CommTable::hashHex(op.op.comm_hash);
  const bool graph_with_collective = op.op.cls == OpClass::kGraph && op.op.comm_hash != 0;
  if (op.op.cls == OpClass::kCollective || graph_with_collective) p.seq = op.op.seq;
  p.bytes = op.op.bytes;
  if (op.op.cls == OpClass::kCollective || op.op.cls == OpClass::kP2P || graph_with_collective) {
    p.dtype = ncclDtypeName(op.dtype);
    p.count = op.count;
  }
  if (op.op.peer >= 0) p.peer = op.op.peer;
  p.issued_s_ago = static_cast<double>(in.now_ns - op.op.host_issue_ns) * 1e-9;
  p.age_s = front ? static_cast<double>(in.now_ns - op.front_since_ns) * 1e-9 : 0.0;
  p.gpu_started = op.gpu_started;
  return p;
}

SnapshotStream streamOf(uint64_t stream, const std::deque<PendingOp>& q, const SnapshotInputs& in) {
  SnapshotStream st;
  st.stream = hexId(stream);
  if (!q.empty() && q.front().device >= 0) st.device = q.front().device;
  bool front = true;
  for (const PendingOp& op : q) {
    st.pending.push_back(pendingOf(op, front, in));
    front = false;
  }
  return st;
}

SnapshotHostCall hostCallOf(const BusyHostCall& call, const SnapshotInputs& in) {
  SnapshotHostCall h;
  h.call = call.call;
  h.tid = call.tid;
  h.thread_name = threadName(call.tid);
  h.age_s = static_cast<double>(in.now_ns - call.enter_ns) * 1e-9;
  if (call.comm) {
    if (CommEntry* e = in.comms->find(call.comm)) h.comm = CommTable::hashHex(e->hash);
  }
  if (call.seq_plus1) h.seq = call.seq_plus1 - 1;
  if (call.joining.hash != 0) h.joining = SnapshotJoining{CommTable::hashHex(call.joining.hash), call.joining.rank,
                                                          call.joining.size};
  return h;
}

}  // namespace

std::optional<int> snapshotRank(const RankIdentity& launcher, CommTable& comms) {
  if (launcher.rank) return launcher.rank;
  auto view = comms.view();
  if (!view.empty() && view.front().rank >= 0) return view.front().rank;
  return std::nullopt;
}

WatchdogSnapshot buildSnapshot(const SnapshotInputs& in) {
  WatchdogSnapshot s;
  s.time_unix_s = wallClockSeconds();
  s.timeout_s = in.timeout_s;
  s.detected_here = in.detected_here;
  s.trigger = in.trigger;
  s.health = in.health;
  s.identity = identityOf(in);
  if (in.nccl_ids != nullptr) tieNcclIds(*in.comms, *in.nccl_ids);
  const std::map<uintptr_t, std::string> async_errors = asyncErrors(*in.comms);
  for (const CommView& c : in.comms->view()) s.comms.push_back(commOf(c, async_errors));
  for (const auto& [stream, q] : in.queues->streams()) s.streams.push_back(streamOf(stream, q, in));
  in.host_calls->forEachBusy([&](const BusyHostCall& call) { s.host_calls.push_back(hostCallOf(call, in)); });
  for (uint64_t made : in.host_calls->idsMade()) s.unique_ids_made.push_back(CommTable::hashHex(made));
  if (in.progress != nullptr && in.nccl_ids != nullptr && in.nccl_ids->initsSeen() > 0)
    s.progress = buildProgress(*in.progress, in.nccl_ids->initsSeen(), in.now_ns);
  s.nccl_log = in.nccl_log;
  return s;
}

}  // namespace hangwatch::watchdog
