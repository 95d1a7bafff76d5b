// The ring algorithms, the tree AllReduce and PAT's AllGather and ReduceScatter, one channel
// at a time: the channel's slice of the buffer moves in steps of one slot, like NCCL's
// ring/SIMPLE, tree/SIMPLE and PAT/SIMPLE kernels. The same code also
// counts an operation's steps without moving data, as NCCL's proxy must know them
// up front (ProxyOp nSteps).
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "hangwatch/simgpu/faults.h"
#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/reduction.h"
#include "hangwatch/simgpu/nccl/task_profile.h"

namespace simnccl {

struct Range {
  size_t begin;
  size_t end;
};

class CollectiveRunner {
 public:
  // With `counting`, nothing moves: run() only counts the steps into it.
  CollectiveRunner(Communicator& comm, const Op& op, int channel, ChannelSteps* counting = nullptr)
      : comm_(comm),
        op_(op),
        channel_(channel),
        n_(comm.nranks_),
        r_(comm.rank_),
        esize_(dtypeSize(op.dtype)),
        chunk_(comm.segment_->shape().slot_bytes / esize_),
        transport_(*comm.segment_, comm.aborted_, comm.rank_, op, comm.peer_watch_.get()),
        counting_(counting) {
    Communicator::ChannelState& cs = comm.channels_[channel];
    SharedSegment& seg = *comm.segment_;
    if (op.algo == Algo::kTree) {
      const TreeLinks& t = comm.tree(channel);
      if (t.up >= 0) {
        up_send_ = sendEnd(seg.treeConnection(channel, r_, true), t.up, peerState(cs, t.up));
        up_recv_ = recvEnd(seg.treeConnection(channel, r_, false), t.up, peerState(cs, t.up).recv_step);
      }
      for (int child : t.down) {
        Communicator::PeerState& ps = peerState(cs, child);
        child_recv_.push_back(recvEnd(seg.treeConnection(channel, child, true), child, ps.recv_step));
        child_send_.push_back(sendEnd(seg.treeConnection(channel, child, false), child, ps));
      }
    } else if (op.algo == Algo::kPat) {
      // NCCL's PAT connections (src/transport/generic.cc ncclTransportPatConnect).
      const bool ag = op.kind == OpKind::AllGather;
      for (int dim = 0; dim < patDimensions(n_); ++dim) {
        const int to = ag ? mod(r_ - (1 << dim)) : mod(r_ + (1 << dim));
        const int from = ag ? mod(r_ + (1 << dim)) : mod(r_ - (1 << dim));
        Communicator::PeerState& ps = counting_ ? counted_ : cs.pat[static_cast<size_t>(2 * dim + (ag ? 1 : 0))];
        pat_send_.push_back(sendEnd(seg.patConnection(channel, r_, dim, ag), to, ps));
        pat_recv_.push_back(recvEnd(seg.patConnection(channel, from, dim, ag), from, ps.recv_step));
      }
    } else {
      const int next = (r_ + 1) % n_;
      const int prev = (r_ + n_ - 1) % n_;
      send_ = sendEnd(seg.ringConnection(channel, r_), next, cs.send_step, cs.pacer, cs.credit_heard);
      recv_ = recvEnd(seg.ringConnection(channel, prev), prev, cs.recv_step);
    }
    if (!counting_) nameTheGraph();
    scratch_ = cs.scratch.data();
    if (counting_) {
      Range p = part(op.count);
      counting_->has_work = p.end > p.begin;
    }
  }

  bool run() {
    switch (op_.kind) {
      case OpKind::AllReduce: return op_.algo == Algo::kTree ? treeAllReduce() : allReduce();
      case OpKind::AllGather: return op_.algo == Algo::kPat ? patAllGather() : allGather();
      case OpKind::ReduceScatter: return op_.algo == Algo::kPat ? patReduceScatter() : reduceScatter();
      case OpKind::Broadcast: return broadcast();
      case OpKind::Reduce: return reduce();
      default: return false;
    }
  }

 private:
  // This channel's share of `count` elements.
  Range part(size_t count) const {
    size_t nch = static_cast<size_t>(comm_.nchannels_);
    return {count * channel_ / nch, count * (channel_ + 1) / nch};
  }
  int mod(int x) const { return ((x % n_) + n_) % n_; }
  const char* in(size_t elem) const { return static_cast<const char*>(op_.sendbuff) + elem * esize_; }
  char* out(size_t elem) const { return static_cast<char*>(op_.recvbuff) + elem * esize_; }

  // Each end's place on the algorithm's graph, and all of them to the transport, whose wait
  // sites show a debugger the whole channel.
  void nameTheGraph() {
    std::vector<const SendEnd*> sends;
    std::vector<const RecvEnd*> recvs;
    if (op_.algo == Algo::kTree) {
      if (up_send_) {
        up_send_->role = up_recv_->role = "tree-parent";
        sends.push_back(&*up_send_);
        recvs.push_back(&*up_recv_);
      }
      for (SendEnd& e : child_send_) {
        e.role = "tree-child";
        sends.push_back(&e);
      }
      for (RecvEnd& e : child_recv_) {
        e.role = "tree-child";
        recvs.push_back(&e);
      }
    } else if (op_.algo == Algo::kPat) {
      for (SendEnd& e : pat_send_) {
        e.role = "pat";
        sends.push_back(&e);
      }
      for (RecvEnd& e : pat_recv_) {
        e.role = "pat";
        recvs.push_back(&e);
      }
    } else {
      send_.role = "ring-next";
      recv_.role = "ring-prev";
      sends.push_back(&send_);
      recvs.push_back(&recv_);
    }
    std::vector<int> sends_to;  // as SIMGPU_FAULTS names ranks
    for (const SendEnd* e : sends) sends_to.push_back(comm_.faultRank(e->peer));
    simgpu::FaultLedger::instance().ran(comm_.faults_, comm_.faultRank(r_), op_.seq, algoName(op_.algo), sends_to);
    transport_.setChannelEnds(std::move(sends), std::move(recvs));
  }

  // While counting (on the launching thread) no end touches the channel's state.
  Communicator::PeerState& peerState(Communicator::ChannelState& cs, int peer) {
    return counting_ ? counted_ : cs.tree.at(peer);
  }
  SendEnd sendEnd(Connection& conn, int peer, Communicator::PeerState& ps) {
    return sendEnd(conn, peer, ps.send_step, ps.pacer, ps.credit_heard);
  }
  SendEnd sendEnd(Connection& conn, int peer, uint64_t& step, LinkPacer& pacer, std::optional<uint64_t>& heard) {
    TaskProfile* profile = op_.profile.get();
    SendEnd end{&conn,
                counting_ ? &counted_.send_step : &step,
                &pacer,
                peer,
                channel_,
                comm_.linkGbps(r_, peer),
                comm_.linkDeadAt(r_, peer, op_.seq, channel_),
                comm_.nodes_.crossesNodes(r_, peer),
                profile ? profile->sendOp(channel_, peer) : nullptr};
    if (!counting_) comm_.applySendFaults(end, op_.seq, heard);
    return end;
  }
  RecvEnd recvEnd(Connection& conn, int peer, uint64_t& step) {
    TaskProfile* profile = op_.profile.get();
    RecvEnd end{&conn, counting_ ? &counted_.recv_step : &step, peer, channel_,
                profile ? profile->recvOp(channel_, peer) : nullptr};
    if (!counting_) comm_.placeOnNic(end, op_.seq);
    return end;
  }

  bool sendTo(SendEnd& end, const void* src, size_t elems) {
    if (counting_) return counting_->count(end.peer, true, end.conn), true;
    return transport_.send(end, src, elems * esize_);
  }
  bool recvCopyFrom(RecvEnd& end, void* dst, size_t elems) {
    if (counting_) return counting_->count(end.peer, false, end.conn), true;
    return transport_.recv(end, [&](const void* data, size_t) {
      if (elems) std::memmove(dst, data, elems * esize_);
    });
  }
  // dst = own (op) incoming; `last` marks the final contribution (ncclAvg divides there).
  bool recvReduceFrom(RecvEnd& end, void* dst, const void* own, size_t elems, bool last) {
    if (counting_) return counting_->count(end.peer, false, end.conn), true;
    return transport_.recv(end, [&](const void* data, size_t) {
      reduceInto(dst, own, data, elems, op_.dtype, op_.redop);
      if (last) finalizeAverage(dst, elems, op_.dtype, op_.redop, n_);
    });
  }
  bool send(const void* src, size_t elems) { return sendTo(send_, src, elems); }
  bool recvCopy(void* dst, size_t elems) { return recvCopyFrom(recv_, dst, elems); }
  bool recvReduce(void* dst, const void* own, size_t elems, bool last) {
    return recvReduceFrom(recv_, dst, own, elems, last);
  }
  void copyLocal(void* dst, const void* src, size_t elems) {
    if (!counting_ && dst != src && elems) std::memmove(dst, src, elems * esize_);
  }

  bool allReduce() {
    Range p = part(op_.count);
    if (n_ == 1) return copyLocal(out(p.begin), in(p.begin), p.end - p.begin), true;
    for (size_t off = p.begin; off < p.end; off += n_ * chunk_) {
      auto seg = [&](int i) -> Range {
        size_t b = std::min(p.end, off + i * chunk_);
        return {b, std::min(p.end, b + chunk_)};
      };
      // Reduce-scatter: after n-1 steps this rank holds the full reduction of segment r+1.
      for (int s = 0; s < n_ - 1; ++s) {
        Range snd = seg(mod(r_ - s));
        Range rcv = seg(mod(r_ - s - 1));
        if (!send(s == 0 ? in(snd.begin) : out(snd.begin), snd.end - snd.begin)) return false;
        if (!recvReduce(out(rcv.begin), in(rcv.begin), rcv.end - rcv.begin, s == n_ - 2)) return false;
      }
      // All-gather the reduced segments around the ring.
      for (int s = 0; s < n_ - 1; ++s) {
        Range snd = seg(mod(r_ + 1 - s));
        Range rcv = seg(mod(r_ - s));
        if (!send(out(snd.begin), snd.end - snd.begin)) return false;
        if (!recvCopy(out(rcv.begin), rcv.end - rcv.begin)) return false;
      }
    }
    return true;
  }

  // NCCL's tree AllReduce (src/device/all_reduce.h, runTreeUpDown): every chunk is reduced
  // up the tree (a leaf sends its own; an inner rank adds its children's to its own and sends
  // the sum to its parent; the root adds its children's), then the result is broadcast down.
  bool treeAllReduce() {
    Range p = part(op_.count);
    if (n_ == 1) return copyLocal(out(p.begin), in(p.begin), p.end - p.begin), true;
    const bool root = !up_send_.has_value();
    const size_t nchildren = child_recv_.size();
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      if (nchildren == 0) {
        if (!sendTo(*up_send_, in(off), len)) return false;
        continue;
      }
      for (size_t k = 0; k < nchildren; ++k) {
        const bool last = root && k + 1 == nchildren;
        if (!recvReduceFrom(child_recv_[k], out(off), k == 0 ? in(off) : out(off), len, last)) return false;
      }
      if (!root && !sendTo(*up_send_, out(off), len)) return false;
    }
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      if (!root && !recvCopyFrom(*up_recv_, out(off), len)) return false;
      for (SendEnd& child : child_send_)
        if (!sendTo(child, out(off), len)) return false;
    }
    return true;
  }

  bool allGather() {
    Range p = part(op_.count);
    size_t count = op_.count;
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      copyLocal(out(r_ * count + off), in(off), len);
      for (int s = 0; s < n_ - 1; ++s) {
        if (!send(out(mod(r_ - s) * count + off), len)) return false;
        if (!recvCopy(out(mod(r_ - s - 1) * count + off), len)) return false;
      }
    }
    return true;
  }

  bool reduceScatter() {
    Range p = part(op_.count);
    size_t count = op_.count;
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      if (n_ == 1) copyLocal(out(off), in(off), len);
      // The partial sum received at step s is what this rank sends at step s+1.
      for (int s = 0; s < n_ - 1; ++s) {
        int snd = mod(r_ - s - 1);
        int rcv = mod(r_ - s - 2);
        if (!send(s == 0 ? in(snd * count + off) : scratch_, len)) return false;
        bool last = s == n_ - 2;
        if (!recvReduce(last ? out(off) : scratch_, in(rcv * count + off), len, last)) return false;
      }
    }
    return true;
  }

  // PAT's exchange with NCCL's peers (src/proxy.cc ncclPatternPatDown): at the step of
  // distance d = 1, 2, 4, ... a rank holds the blocks of ranks r .. r+d-1, sends them to
  // r - d and receives those of r+d .. r+2d-1 from r + d (Bruck's order; NCCL's PatAGAlgorithm
  // aggregates the same dimensions in another order, so the step counts per peer differ).
  bool patAllGather() {
    Range p = part(op_.count);
    size_t count = op_.count;
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      copyLocal(out(r_ * count + off), in(off), len);
      for (int dim = 0; (1 << dim) < n_; ++dim) {
        const int d = 1 << dim;
        for (int j = 0; j < std::min(d, n_ - d); ++j) {
          if (!sendTo(pat_send_[dim], out(mod(r_ + j) * count + off), len)) return false;
          if (!recvCopyFrom(pat_recv_[dim], out(mod(r_ + d + j) * count + off), len)) return false;
        }
      }
    }
    return true;
  }

  // PAT's ReduceScatter with NCCL's peers (ncclPatternPatUp), the same exchange reversed: a
  // rank starts with every block's partial sum at offsets 0 .. n-1 from itself; at distance
  // d = 2^(dims-1) .. 1 it sends those at offsets d .. 2d-1 to r + d and adds what r - d
  // sends into its offsets 0 .. d-1. Offset 0, its own block, is complete after d = 1.
  bool patReduceScatter() {
    Range p = part(op_.count);
    size_t count = op_.count;
    const int dims = patDimensions(n_);
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      if (n_ == 1) {
        copyLocal(out(off), in(off), len);
        continue;
      }
      if (!counting_) {
        pat_work_.resize(static_cast<size_t>(n_) * len * esize_);
        for (int j = 0; j < n_; ++j) copyLocal(work(j, len), in(mod(r_ + j) * count + off), len);
      }
      for (int dim = dims - 1; dim >= 0; --dim) {
        const int d = 1 << dim;
        for (int j = d; j < std::min(2 * d, n_); ++j) {
          if (!sendTo(pat_send_[dim], work(j, len), len)) return false;
          const bool last = dim == 0;
          if (!recvReduceFrom(pat_recv_[dim], last ? out(off) : work(j - d, len), work(j - d, len), len, last))
            return false;
        }
      }
    }
    return true;
  }
  char* work(int offset, size_t len) {
    return counting_ ? nullptr : pat_work_.data() + static_cast<size_t>(offset) * len * esize_;
  }

  bool broadcast() {
    Range p = part(op_.count);
    int pos = mod(r_ - op_.root);  // chain root -> root+1 -> ... -> root-1
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      if (pos == 0) {
        copyLocal(out(off), in(off), len);
        if (n_ > 1 && !send(in(off), len)) return false;
        continue;
      }
      if (!recvCopy(out(off), len)) return false;
      if (pos < n_ - 1 && !send(out(off), len)) return false;
    }
    return true;
  }

  bool reduce() {
    Range p = part(op_.count);
    int pos = mod(r_ - op_.root - 1);  // chain root+1 -> ... -> root
    bool is_root = pos == n_ - 1;
    for (size_t off = p.begin; off < p.end; off += chunk_) {
      size_t len = std::min(chunk_, p.end - off);
      if (n_ == 1) {
        copyLocal(out(off), in(off), len);
        continue;
      }
      if (pos == 0) {
        if (!send(in(off), len)) return false;
        continue;
      }
      void* dst = is_root ? static_cast<void*>(out(off)) : static_cast<void*>(scratch_);
      if (!recvReduce(dst, in(off), len, is_root)) return false;
      if (!is_root && !send(scratch_, len)) return false;
    }
    return true;
  }

  Communicator& comm_;
  const Op& op_;
  int channel_;
  int n_;
  int r_;
  size_t esize_;
  size_t chunk_;
  StepTransport transport_;
  ChannelSteps* counting_;
  Communicator::PeerState counted_;  // the step counts ends use while counting
  SendEnd send_{};  // ring
  RecvEnd recv_{};
  std::optional<SendEnd> up_send_;  // tree: to the parent and from it (none at the root)
  std::optional<RecvEnd> up_recv_;
  std::vector<RecvEnd> child_recv_;  // from each child, and to it
  std::vector<SendEnd> child_send_;
  std::vector<SendEnd> pat_send_;  // PAT: per dimension
  std::vector<RecvEnd> pat_recv_;
  std::vector<char> pat_work_;  // PAT ReduceScatter: every block's partial sum
  char* scratch_;
};

bool runCollectiveOnChannel(Communicator& comm, const Op& op, int channel) {
  return CollectiveRunner(comm, op, channel).run();
}

ChannelSteps countCollectiveSteps(Communicator& comm, const Op& op, int channel) {
  ChannelSteps steps;
  CollectiveRunner(comm, op, channel, &steps).run();
  return steps;
}

}  // namespace simnccl
