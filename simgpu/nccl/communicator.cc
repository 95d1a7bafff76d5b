#include "hangwatch/simgpu/nccl/communicator.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "hangwatch/common/rank_identity.h"
#include "hangwatch/simgpu/config.h"
#include "hangwatch/simgpu/nccl/debug_log.h"
#include "hangwatch/simgpu/nccl/net_devices.h"
#include "hangwatch/simgpu/nccl/ras_server.h"
#include "hangwatch/simgpu/nccl/reduction.h"
#include "hangwatch/simgpu/nccl/unique_id.h"

namespace simnccl {

bool runCollectiveOnChannel(Communicator& comm, const Op& op, int channel);
ChannelSteps countCollectiveSteps(Communicator& comm, const Op& op, int channel);

hangwatch::Expected<std::shared_ptr<Communicator>> Communicator::join(const ncclUniqueId& id, int nranks, int rank,
                                                                      int device, const char* comm_name) {
  auto name = segmentNameFromId(id);
  if (!name) return hangwatch::Error{name.error()};
  const auto& faults = simgpu::processFaults();
  if (!faults) return hangwatch::Error{"SIMGPU_FAULTS: " + faults.error()};
  auto node_key = localNodeKey(rank);
  if (!node_key) return hangwatch::Error{node_key.error()};
  auto net = netFromEnvironment();
  if (!net) return hangwatch::Error{net.error()};
  auto algos = AlgoTable::fromEnvironment();
  if (!algos) return hangwatch::Error{algos.error()};

  const simgpu::SimConfig& cfg = simgpu::simConfig();
  SegmentShape shape{nranks, cfg.nchannels, cfg.slot_bytes};
  auto opened = SharedSegment::open(*name, shape);
  if (!opened) return hangwatch::Error{opened.error()};
  std::unique_ptr<SharedSegment> segment(*opened);

  hangwatch::RankIdentity identity = hangwatch::detectRankIdentity();
  RankRecord& me = segment->rank(rank);
  if (me.joined.exchange(1) != 0) return hangwatch::Error{fmt::format("rank {} joined twice", rank)};
  me.pid = ::getpid();
  me.launcher_rank = identity.rank.value_or(kNoLauncherRank);
  me.device = device;
  ::gethostname(me.host, sizeof(me.host) - 1);
  const int net_dev = localNetDev(*net, device);
  *fmt::format_to_n(me.nic, sizeof(me.nic) - 1, "{}", netDevName(net_dev)).out = '\0';
  *fmt::format_to_n(me.node_key, sizeof(me.node_key) - 1, "{}", *node_key).out = '\0';
  me.nvml_dev = gpuOnNode(device);

  // Like ncclCommInitRank, block until every rank arrived.
  StepCounter& arrivals = segment->header().arrivals;
  addToCounter(arrivals, 1);
  for (;;) {
    uint32_t word = arrivals.futex_word.load();
    if (arrivals.value.load() >= static_cast<uint64_t>(nranks)) break;
    sleepOnCounter(arrivals, word, 100);
  }
  // Everyone has it mapped now; the name is no longer needed and nothing leaks in /dev/shm.
  if (rank == 0) segment->unlink();

  std::shared_ptr<Communicator> comm(new Communicator(rank, nranks, device, std::move(segment), *faults));
  comm->net_ = *net;
  comm->net_dev_ = net_dev;
  comm->algos_ = *algos;
  if (!faults->dead_nics.empty()) comm->noteNics();
  if (comm->nodes_.nodes() > 1)
    comm->peer_watch_ =
        std::make_unique<NetPeerWatch>(*comm->segment_, comm->nodes_, rank, *net, comm->async_error);
  int world = nranks;
  if (!comm->launcher_ranks_.empty()) {
    world = identity.world_size.value_or(0);
    for (int r : comm->launcher_ranks_) world = std::max(world, r + 1);
  }
  if (auto ok = faults->checkRanksBelow(world); !ok) return hangwatch::Error{"SIMGPU_FAULTS: " + ok.error()};
  if (auto hooks = ProfilerHooks::attach(communicatorId(name->c_str()), comm_name, comm->nodes_.nodes(), nranks, rank))
    comm->profiler_ =
        std::make_unique<CommProfiler>(std::move(hooks), *comm->segment_, comm->nodes_, rank, comm->aborted_);
  comm->connection_log_ = std::make_unique<ConnectionLog>(comm->connectionLogView());
  comm->startChannels();
  RasServer::registerComm(comm.get(), comm->segment_.get(), communicatorId(name->c_str()));
  return comm;
}

Communicator::Communicator(int rank, int nranks, int device, std::unique_ptr<SharedSegment> segment,
                           const simgpu::FaultPlan& faults)
    : rank_(rank),
      nranks_(nranks),
      device_(device),
      nchannels_(segment->shape().nchannels),
      segment_(std::move(segment)),
      faults_(faults),
      channels_(nchannels_),
      peers_(nranks) {
  if (!faults_.empty()) simgpu::FaultLedger::reportAtExit();
  std::vector<std::string> node_keys;
  for (int r = 0; r < nranks_; ++r) node_keys.emplace_back(segment_->rank(r).node_key);
  nodes_ = NodeTopology(node_keys);
  // Launcher ranks name fault targets only when every member has a distinct one
  // (several ranks in one process, as with ncclCommInitAll, fall back to comm ranks).
  std::set<int> seen;
  for (int r = 0; r < nranks_; ++r) {
    int lr = segment_->rank(r).launcher_rank;
    if (lr == kNoLauncherRank || !seen.insert(lr).second) {
      launcher_ranks_.clear();
      break;
    }
    launcher_ranks_.push_back(lr);
  }
  for (ChannelState& c : channels_) {
    c.scratch.resize(segment_->shape().slot_bytes);
    c.pat.resize(static_cast<size_t>(2 * patDimensions(nranks_)));
  }
  for (int c = 0; c < nchannels_; ++c) {
    trees_.push_back(treeLinks(nodes_, nranks_, rank_, c, nchannels_));
    // Made here, never later: a launch counts steps through them from another thread.
    if (trees_.back().up >= 0) channels_[c].tree[trees_.back().up];
    for (int child : trees_.back().down) channels_[c].tree[child];
  }
}

Communicator::~Communicator() {
  shutdown();
  if (kernel_stream_ != nullptr) cudaStreamDestroy(kernel_stream_);  // queued work still runs
}

cudaStream_t Communicator::kernelStream() {
  std::call_once(kernel_stream_once_, [this] {
    int saved = 0;
    cudaGetDevice(&saved);
    cudaSetDevice(device_);
    if (cudaStreamCreateWithFlags(&kernel_stream_, cudaStreamNonBlocking) != cudaSuccess) kernel_stream_ = nullptr;
    cudaSetDevice(saved);
  });
  return kernel_stream_;
}

void Communicator::startChannels() {
  // All workers exist before any thread starts: a running thread must never see workers_ grow.
  for (int c = 0; c < nchannels_; ++c) workers_.push_back(std::make_unique<ChannelWorker>());
  for (int c = 0; c < nchannels_; ++c) workers_[c]->thread = std::thread([this, c] { channelMain(c); });
}

void Communicator::shutdown() {
  RasServer::unregisterComm(this);  // before anything RAS reads of it can go
  if (profiler_) profiler_->stop();
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mutex);
    w->stopping = true;
    w->wake.notify_all();
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  workers_.clear();
  // Joined here, not when the last reference goes (a stream's queued work may hold one): a
  // process that exits right after ncclCommAbort leaves no thread of the communicator behind.
  if (peer_watch_) peer_watch_->stop();
}

void Communicator::abort() {
  aborted_.store(true, std::memory_order_release);
  async_error.store(ncclSystemError);
}

int Communicator::faultRank(int comm_rank) const {
  return launcher_ranks_.empty() ? comm_rank : launcher_ranks_[comm_rank];
}

double Communicator::linkGbps(int from, int to) const {
  return simgpu::simConfig().link_gbps * faults_.linkSpeed(faultRank(from), faultRank(to));
}

bool Communicator::linkDeadAt(int from, int to, uint64_t seq, int channel) const {
  return faults_.linkDeadAt(faultRank(from), faultRank(to), seq, channel);
}

void Communicator::noteNics() const {
  simgpu::FaultLedger& ledger = simgpu::FaultLedger::instance();
  const RankRecord& me = segment_->rank(rank_);
  ledger.usesNic(faults_, faultRank(rank_), me.host, me.nic);
  for (int r = 0; r < nranks_; ++r) ledger.sawNic(segment_->rank(r).host, segment_->rank(r).nic);
}

const simgpu::DeadNicFault* Communicator::deadNicWith(int peer, uint64_t seq) const {
  if (faults_.dead_nics.empty() || !nodes_.crossesNodes(rank_, peer)) return nullptr;
  for (int r : {rank_, peer}) {
    const RankRecord& rec = segment_->rank(r);
    if (const simgpu::DeadNicFault* f = faults_.deadNicAt(rec.host, rec.nic, seq)) return f;
  }
  return nullptr;
}

int Communicator::netDevWith(int peer) const { return nodes_.crossesNodes(rank_, peer) ? net_dev_ : -1; }

ConnectionLogView Communicator::connectionLogView() const {
  ConnectionLogView v;
  v.rank = rank_;
  v.cuda_dev = device_;
  v.nchannels = nchannels_;
  v.nnodes = nodes_.nodes();
  v.net = net_;
  for (int r = 0; r < nranks_; ++r) {
    v.nvml_dev.push_back(segment_->rank(r).nvml_dev);
    v.net_dev.push_back(netDevWith(r));
  }
  return v;
}

void Communicator::logConnections(const Op& op) {
  if (!debugEnabled(kLogInfo, subsys::kInit | subsys::kNet)) return;
  if (!isCollective(op.kind)) connection_log_->connectP2p(op.peer, op.kind == OpKind::Send, 0);  // runPeerOps' channel
  else if (op.algo == Algo::kTree) connection_log_->connectTree(trees_);
  else if (op.algo == Algo::kPat) connection_log_->connectPat();
  else connection_log_->connectRing();
}

void Communicator::placeOnNic(SendEnd& end) const {
  if (end.net) end.net_dev = netDevWith(end.peer);
}

void Communicator::placeOnNic(RecvEnd& end, uint64_t seq) const {
  if (!nodes_.crossesNodes(rank_, end.peer)) return;
  end.net_dev = netDevWith(end.peer);
  if (const simgpu::DeadNicFault* f = deadNicWith(end.peer, seq)) simgpu::FaultLedger::instance().fired(f->token);
}

void Communicator::applySendFaults(SendEnd& end, uint64_t seq, std::optional<uint64_t>& credit_heard) const {
  end.eager = end.net && net_ == NetKind::kSocket;
  placeOnNic(end);
  if (end.dead) {
    const simgpu::DeadLinkFault* f = faults_.deadLinkAt(faultRank(rank_), faultRank(end.peer), seq, end.channel);
    if (f != nullptr) end.dead_fault = &f->token;
  } else if (const simgpu::DeadNicFault* f = deadNicWith(end.peer, seq)) {
    end.dead = true;
    end.dead_fault = &f->token;
  }
  const simgpu::LostCreditFault* lost = faults_.lostCreditAt(faultRank(rank_), faultRank(end.peer), seq);
  if (lost == nullptr) return;
  end.credit_fault = &lost->token;
  if (!credit_heard) credit_heard = end.conn->head.value.load(std::memory_order_acquire);
  end.credit_heard = &*credit_heard;
}

hangwatch::Expected<std::vector<int>> Communicator::exchangeSplit(int color, int key) {
  uint64_t gen = ++split_generation_;
  int slot = static_cast<int>(gen % 2);
  RankRecord& me = segment_->rank(rank_);
  me.split_color[slot] = color;
  me.split_key[slot] = key;
  StepCounter& arrivals = segment_->header().split_arrivals;
  addToCounter(arrivals, 1);
  uint64_t target = gen * static_cast<uint64_t>(nranks_);
  for (;;) {
    uint32_t word = arrivals.futex_word.load();
    if (arrivals.value.load() >= target) break;
    if (aborted()) return hangwatch::Error{"communicator aborted during split"};
    sleepOnCounter(arrivals, word, 100);
  }
  std::vector<std::pair<int, int>> members;  // (key, rank)
  for (int r = 0; r < nranks_; ++r) {
    const RankRecord& rec = segment_->rank(r);
    if (rec.split_color[slot] == color) members.emplace_back(rec.split_key[slot], r);
  }
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (auto& m : members) ranks.push_back(m.second);
  return ranks;
}

bool Communicator::deviceDeadAt(uint64_t seq) const { return faults_.rankDeadAt(faultRank(rank_), seq); }

void Communicator::channelMain(int channel) {
  pthread_setname_np(pthread_self(), fmt::format("simnccl-ch{}", channel).substr(0, 15).c_str());
  ChannelWorker& w = *workers_[channel];
  for (;;) {
    std::shared_ptr<ChannelBatch> batch;
    {
      std::unique_lock<std::mutex> lock(w.mutex);
      w.wake.wait(lock, [&] { return w.stopping || !w.queue.empty(); });
      if (w.queue.empty()) return;
      batch = std::move(w.queue.front());
      w.queue.pop_front();
    }
    bool ok = true;
    for (const Op& op : batch->ops) {
      if (!(ok = runOnChannel(op, channel))) break;
    }
    std::lock_guard<std::mutex> lock(batch->mutex);
    batch->aborted |= !ok;
    if (--batch->remaining == 0) batch->done.notify_all();
  }
}

bool Communicator::runOnChannel(const Op& op, int channel) {
  if (aborted()) return false;
  TaskProfile* profile = op.profile.get();
  if (profile != nullptr) profile->kernelStarted(channel);
  if (const simgpu::DeadRankFault* dead = faults_.deadRankAt(faultRank(rank_), op.seq)) {
    simgpu::FaultLedger::instance().fired(dead->token);
    simnccl_device_stalled(rank_, channel, op.seq, opName(op.kind), &aborted_);
    return false;
  }
  if (!runCollectiveOnChannel(*this, op, channel)) return false;
  if (profile != nullptr) profile->kernelFinished(channel);
  return true;
}

ChannelSteps Communicator::stepsOn(const Op& op, int channel) {
  if (isCollective(op.kind)) return countCollectiveSteps(*this, op, channel);
  const size_t slot = segment_->shape().slot_bytes;
  const int steps = static_cast<int>((op.count * dtypeSize(op.dtype) + slot - 1) / slot);
  const bool send = op.kind == OpKind::Send;
  Connection* conn = send ? &segment_->p2pConnection(rank_, op.peer) : &segment_->p2pConnection(op.peer, rank_);
  ChannelSteps s;
  s.has_work = true;
  if (steps > 0) s.ends.push_back({op.peer, send, steps, conn});
  return s;
}

std::shared_ptr<TaskProfile> Communicator::profileLaunch(const Op& op, bool persistent, void* group_event) {
  if (!profiler_) return nullptr;
  return profiler_->launch(op, persistent, group_event, [&](int channel) { return stepsOn(op, channel); });
}

bool Communicator::runCollectives(std::vector<Op> ops) {
  auto batch = std::make_shared<ChannelBatch>();
  batch->ops = std::move(ops);
  batch->remaining = nchannels_;
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mutex);
    w->queue.push_back(batch);
    w->wake.notify_one();
  }
  std::unique_lock<std::mutex> lock(batch->mutex);
  batch->done.wait(lock, [&] { return batch->remaining == 0; });
  return !batch->aborted;
}

bool Communicator::runPeerOps(const std::vector<Op>& ops, uint64_t launch_index) {
  // DESIGN.md's op K counts the collectives a rank issued on the communicator. A communicator
  // that has run none (a pipeline's) never reaches K > 0 that way, so there K counts its
  // transfer launches; once it runs collectives, the contract's count holds.
  const uint64_t collectives = next_seq_.load();
  const uint64_t launch = collectives > 0 ? collectives : launch_index;
  const size_t slot = segment_->shape().slot_bytes;
  for (const Op& op : ops) {
    if (aborted()) return false;
    size_t esize = dtypeSize(op.dtype);
    size_t bytes = op.count * esize;
    PeerState& ps = peers_[op.peer];
    StepTransport transport(*segment_, aborted_, rank_, op, peer_watch_.get());
    TaskProfile* profile = op.profile.get();
    if (profile != nullptr) profile->kernelStarted(0);
    simgpu::FaultLedger::instance().ran(faults_, faultRank(rank_), launch, "P2P",
                                        op.kind == OpKind::Send ? std::vector<int>{faultRank(op.peer)} : std::vector<int>{});
    if (op.kind == OpKind::Send) {
      SendEnd end{&segment_->p2pConnection(rank_, op.peer), &ps.send_step, &ps.pacer, op.peer, 0,
                  linkGbps(rank_, op.peer), linkDeadAt(rank_, op.peer, launch, 0),
                  nodes_.crossesNodes(rank_, op.peer), profile ? profile->sendOp(0, op.peer) : nullptr};
      applySendFaults(end, launch, ps.credit_heard);
      transport.setChannelEnds({&end}, {});
      for (size_t off = 0; off < bytes; off += slot)
        if (!transport.send(end, static_cast<const char*>(op.sendbuff) + off, std::min(slot, bytes - off)))
          return false;
    } else {
      RecvEnd end{&segment_->p2pConnection(op.peer, rank_), &ps.recv_step, op.peer, 0,
                  profile ? profile->recvOp(0, op.peer) : nullptr};
      placeOnNic(end, launch);
      transport.setChannelEnds({}, {&end});
      for (size_t off = 0; off < bytes; off += slot) {
        char* dst = static_cast<char*>(op.recvbuff) + off;
        size_t len = std::min(slot, bytes - off);
        if (!transport.recv(end, [&](const void* data, size_t) { std::memcpy(dst, data, len); })) return false;
      }
    }
    if (profile != nullptr) profile->kernelFinished(0);
  }
  return true;
}

}  // namespace simnccl
