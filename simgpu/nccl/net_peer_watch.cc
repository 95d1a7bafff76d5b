#include "hangwatch/simgpu/nccl/net_peer_watch.h"

#include <pthread.h>
#include <strings.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "hangwatch/simgpu/nccl/debug_log.h"

namespace simnccl {
namespace {

constexpr auto kLookEvery = std::chrono::milliseconds(50);

long envOr(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' ? n : fallback;
}

// Gone: no such process, or a zombie (it exited; the kernel closed what it had open).
bool processGone(int pid) {
  if (pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' || text[paren + 2] == 'X';
}

}  // namespace

NetPeerWatch::NetPeerWatch(SharedSegment& segment, const NodeTopology& nodes, int rank, NetKind net,
                           std::atomic<ncclResult_t>& async_error)
    : segment_(segment), rank_(rank), net_(net), ib_retry_(ibRetryTime()), async_error_(async_error) {
  for (int r = 0; r < static_cast<int>(segment.header().nranks.load()); ++r)
    if (nodes.crossesNodes(rank, r)) remote_.push_back(r);
  thread_ = std::thread([this] { run(); });
  // Named here, not by the thread itself: whoever looks right after the init sees the name
  // (15 characters at most: a longer one is refused with ERANGE).
  pthread_setname_np(thread_.native_handle(), "simnccl-netpeer");
}

NetPeerWatch::~NetPeerWatch() { stop(); }

void NetPeerWatch::stop() {
  std::call_once(stopped_, [this] {
    stopping_.store(true, std::memory_order_release);
    thread_.join();
  });
}

NetPeerWatch::Clock::duration NetPeerWatch::ibRetryTime() {
  const long timeout = envOr("NCCL_IB_TIMEOUT", 20), retries = envOr("NCCL_IB_RETRY_CNT", 7);
  const double seconds = static_cast<double>(retries + 1) * 4.096e-6 * std::ldexp(1.0, static_cast<int>(timeout));
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

NetPeerWatch::Wait::Wait(NetPeerWatch* watch, int peer, bool recv) : watch_(watch) {
  if (watch_ == nullptr) return;
  std::lock_guard<std::mutex> lock(watch_->mutex_);
  it_ = watch_->waits_.insert(watch_->waits_.end(), ActiveWait{peer, recv, Clock::now()});
}

NetPeerWatch::Wait::~Wait() {
  if (watch_ == nullptr) return;
  std::lock_guard<std::mutex> lock(watch_->mutex_);
  watch_->waits_.erase(it_);
}

void NetPeerWatch::wrote(int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (gone_.count(peer) && !failing_.count(peer))
    failing_.emplace(peer, Clock::now() + (net_ == NetKind::kSocket ? Clock::duration::zero() : ib_retry_));
}

void NetPeerWatch::run() {
  while (!stopping_.load(std::memory_order_acquire)) {
    look(Clock::now());
    std::this_thread::sleep_for(kLookEvery);
  }
}

void NetPeerWatch::look(Clock::time_point now) {
  std::vector<int> newly_gone;
  for (int r : remote_)
    if (!gone_.count(r) && processGone(segment_.rank(r).pid)) newly_gone.push_back(r);
  std::lock_guard<std::mutex> lock(mutex_);
  for (int r : newly_gone) gone_.emplace(r, now);
  if (failed_) return;
  for (const auto& [peer, when] : failing_)
    if (now >= when)
      return fail(peer, net_ == NetKind::kSocket
                            ? "socketProgress: Connection reset by peer"
                            : "NET/IB: Got CQE with error (a write to the peer's queue pair: retry count exceeded)");
  for (const ActiveWait& w : waits_) {
    auto gone = gone_.find(w.peer);
    if (gone == gone_.end()) continue;
    if (net_ == NetKind::kSocket) return fail(w.peer, w.recv ? "socketProgress: Connection closed by remote peer"
                                                              : "socketProgress: Connection reset by peer");
    if (w.recv && w.since >= gone->second && now - w.since >= ib_retry_)
      return fail(w.peer, "NET/IB: Got CQE with error (a write to the peer's queue pair: retry count exceeded)");
  }
}

void NetPeerWatch::fail(int peer, const char* how) {
  failed_ = true;
  ncclResult_t none = ncclSuccess;
  async_error_.compare_exchange_strong(none, ncclRemoteError);
  // NCCL's WARN, to NCCL_DEBUG_FILE where there is one (src/debug.cc).
  debugLog(kLogWarn, subsys::kNet, "transport/net.cc", __LINE__, "%s %s (comm rank %d; seen by comm rank %d)", how,
           segment_.rank(peer).node_key, peer, rank_);
}

}  // namespace simnccl
