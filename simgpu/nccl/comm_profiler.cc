#include "hangwatch/simgpu/nccl/comm_profiler.h"

#include <cstdlib>

#include "hangwatch/simgpu/config.h"
#include "hangwatch/simgpu/nccl/algorithm.h"
#include "hangwatch/simgpu/nccl/api_profile.h"
#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/reduction.h"

namespace simnccl {
namespace {

namespace np = hangwatch::nccl_profiler;

// What simnccl's kernels are: SIMPLE protocol, with NCCL's full SIMPLE thread count (512)
// plus the ring's extra sync warp, or the tree's four for its split threads (src/enqueue.cc,
// topoGetAlgoInfo).
constexpr const char* kProto = "SIMPLE";
constexpr uint8_t kRingSimpleWarps = 512 / 32 + 1;
constexpr uint8_t kTreeSimpleWarps = 512 / 32 + 4;

// The first of `profiler`'s operations whose call saw a mask decides for the whole kernel,
// as in NCCL.
const Op* firstProfiled(const std::vector<Op>& ops, const CommProfiler* profiler) {
  for (const Op& op : ops)
    if (op.profiler_mask != 0 && op.comm->profiler() == profiler) return &op;
  return nullptr;
}

// ncclRegisterP2pNetBuffer's conditions (src/enqueue.cc, src/register/sendrecv_reg.cc) on
// simgpu's network, an InfiniBand NIC with GPUDirect RDMA (NCCL_DIRECT_NIC): a p2p buffer
// the user registered, moved with the SIMPLE protocol (above NCCL_P2P_LL_THRESHOLD on
// simnccl's one p2p channel), with NCCL_LOCAL_REGISTER on.
bool netRegistered(const Op& op) {
  static const int64_t ll_threshold = simgpu::ncclParam("NCCL_P2P_LL_THRESHOLD", 16384);
  static const bool local_register = simgpu::ncclParam("NCCL_LOCAL_REGISTER", 1) != 0;
  const int64_t bytes = static_cast<int64_t>(op.count * dtypeSize(op.dtype));
  return op.registered && !isCollective(op.kind) && local_register && bytes > ll_threshold;
}

}  // namespace

CommProfiler::CommProfiler(std::unique_ptr<ProfilerHooks> hooks, SharedSegment& segment, const NodeTopology& nodes,
                           int rank, const std::atomic<bool>& aborted)
    : hooks_(std::move(hooks)),
      segment_(segment),
      nodes_(nodes),
      rank_(rank),
      nranks_(segment.shape().nranks),
      nchannels_(segment.shape().nchannels),
      aborted_(aborted) {}

CommProfiler::~CommProfiler() { stop(); }

void CommProfiler::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopped_ = true;
  proxy_.reset();
}

void CommProfiler::watchReceive(std::shared_ptr<NetProxyOp> op) {
  if (stopped_) return;
  if (!proxy_) proxy_ = std::make_unique<NetProxyThread>(segment_.rank(rank_).net_doorbell, aborted_);
  proxy_->watch(std::move(op));
}

void* CommProfiler::startKernelLaunch(const std::vector<Op>& ops) {
  const Op* first = firstProfiled(ops, this);
  if (first == nullptr || (first->profiler_mask & np::emittingMask(np::kKernelLaunch)) == 0) return nullptr;
  np::EventDescr d{};
  d.type = np::kKernelLaunch;
  d.parentObj = first->group_api_event;
  d.kernelLaunch.stream = first->stream;
  return hooks_->start(d);
}

void* CommProfiler::startGroup(const std::vector<Op>& ops) {
  const Op* first = firstProfiled(ops, this);
  if (first == nullptr || (first->profiler_mask & np::emittingMask(np::kGroup)) == 0) return nullptr;
  np::EventDescr d{};
  d.type = np::kGroup;
  return hooks_->start(d);
}

void CommProfiler::startTask(TaskProfile& profile, const Op& op, int channels_with_work, void* group_event,
                             Algo algo) {
  np::EventDescr d{};
  d.rank = rank_;
  d.parentObj = op.api_event;
  if (isCollective(op.kind)) {
    d.type = np::kColl;
    d.coll.seqNumber = seq_of_func_[static_cast<size_t>(op.kind)];
    d.coll.func = opName(op.kind);
    d.coll.sendBuff = op.sendbuff;
    d.coll.recvBuff = op.recvbuff;
    d.coll.count = op.count;
    d.coll.root = op.root;
    d.coll.datatype = api_profile::datatypeName(op.dtype);
    d.coll.nChannels = static_cast<uint8_t>(channels_with_work);
    d.coll.nWarps = algo == Algo::kRing ? kRingSimpleWarps : kTreeSimpleWarps;  // PAT: NCCL_MAX_NTHREADS too
    d.coll.algo = algoName(algo);
    d.coll.proto = kProto;
    d.coll.parentGroup = group_event;
  } else {
    d.type = np::kP2p;
    d.p2p.func = opName(op.kind);
    d.p2p.buff = op.kind == OpKind::Send ? const_cast<void*>(op.sendbuff) : op.recvbuff;
    d.p2p.datatype = api_profile::datatypeName(op.dtype);
    d.p2p.count = op.count;
    d.p2p.peer = op.peer;
    d.p2p.nChannels = static_cast<uint8_t>(channels_with_work);
    d.p2p.parentGroup = group_event;
  }
  profile.startTask(d);
}

std::shared_ptr<TaskProfile> CommProfiler::launch(const Op& op, bool persistent, void* group_event,
                                                  const std::function<ChannelSteps(int channel)>& steps_on_channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int mask = op.profiler_mask;
  const bool collective = isCollective(op.kind);
  const int channels = collective ? nchannels_ : 1;
  const bool wants_task = (mask & np::emittingMask(collective ? np::kColl : np::kP2p)) != 0;
  const bool wants_proxy = (mask & np::emittingMask(np::kProxyOp)) != 0;

  // Counted always: where each connection's next receives start must be known whatever
  // this call's mask asks for.
  std::vector<ChannelSteps> steps;
  for (int c = 0; c < channels; ++c) steps.push_back(steps_on_channel(c));
  int channels_with_work = 0;
  for (const ChannelSteps& s : steps) channels_with_work += s.has_work;

  std::shared_ptr<TaskProfile> profile;
  if (wants_task) {
    profile = std::make_shared<TaskProfile>(*hooks_, (mask & np::kKernelCh) != 0, channels);
    startTask(*profile, op, channels_with_work, group_event, op.algo);
  }
  // comm->seqNumber counts every collective, except graph replays unless KernelCh events are on.
  const bool api_events = group_event != nullptr || (collective && op.api_event != nullptr);
  if (collective && (!persistent || (api_events && (mask & np::kKernelCh) != 0)))
    ++seq_of_func_[static_cast<size_t>(op.kind)];

  const size_t slot = segment_.shape().slot_bytes;
  for (int c = 0; c < channels; ++c) {
    const ChannelSteps& s = steps[static_cast<size_t>(c)];
    if (profile) profile->channel(c).has_work = s.has_work;
    // NCCL's proxy serves the NET connections only (ncclProxySaveOp, per peer of the pattern).
    for (const PeerSteps& e : s.ends) {
      const bool net = e.send ? nodes_.crossesNodes(rank_, e.peer) : nodes_.crossesNodes(e.peer, rank_);
      if (!net || e.steps == 0) continue;
      uint64_t base = 0;
      if (!e.send) {
        uint64_t& next = recv_next_[e.conn];
        base = next;
        next += static_cast<uint64_t>(e.steps);
      }
      if (!profile || !wants_proxy) continue;
      const ProxyOpShape shape{e.send, c, e.peer, e.steps, slot, profile->task(), !e.send && netRegistered(op)};
      auto proxy = std::make_shared<NetProxyOp>(*hooks_, mask, shape, e.conn, base);
      profile->channel(c).ops.push_back({e.peer, e.send, proxy});
      if (!e.send) watchReceive(std::move(proxy));
    }
  }
  return profile;
}

void ChannelSteps::count(int peer, bool send, Connection* conn) {
  for (PeerSteps& e : ends)
    if (e.peer == peer && e.send == send) return void(++e.steps);
  ends.push_back({peer, send, 1, conn});
}

int ChannelSteps::steps(int peer, bool send) const {
  for (const PeerSteps& e : ends)
    if (e.peer == peer && e.send == send) return e.steps;
  return 0;
}

}  // namespace simnccl
