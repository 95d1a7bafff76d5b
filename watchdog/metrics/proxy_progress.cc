#include "hangwatch/watchdog/metrics/proxy_progress.h"

#include <sched.h>

#include <cstring>

namespace hangwatch::watchdog {
namespace {

enum SlotState : int { kFree = 0, kClaiming = 1, kPublished = 2 };

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// Waits out another thread that is writing a slot's key (a few stores).
int publishedState(const std::atomic<int>& state) {
  int s = state.load(std::memory_order_acquire);
  while (s == kClaiming) {
    sched_yield();
    s = state.load(std::memory_order_acquire);
  }
  return s;
}

// The slot of `table` whose key `matches`, probing from `hash`; a free slot on the way is
// claimed, given its key by `init` and published. nullptr when the table is full.
template <typename Slot, size_t N, typename StateOf, typename Matches, typename Init>
Slot* findOrClaim(Slot (&table)[N], uint64_t hash, StateOf state_of, Matches matches, Init init) {
  for (size_t probe = 0; probe < N; ++probe) {
    Slot& slot = table[(hash + probe) % N];
    std::atomic<int>& state = state_of(slot);
    int s = publishedState(state);
    if (s == kFree) {
      int expected = kFree;
      if (state.compare_exchange_strong(expected, kClaiming, std::memory_order_acq_rel)) {
        init(slot);
        state.store(kPublished, std::memory_order_release);
        return &slot;
      }
      s = publishedState(state);
    }
    if (matches(slot)) return &slot;
  }
  return nullptr;
}

const char* const kSendStages[kProxyStages] = {"posted", "filled", "sent", "done"};
const char* const kRecvStages[kProxyStages] = {"posted", "arrived", "delivered", "done"};
const char* const kAlgorithmNames[kCollAlgorithms] = {"TREE", "RING",     "COLLNET_DIRECT", "COLLNET_CHAIN",
                                                      "NVLS", "NVLS_TREE", "PAT",           "other"};

}  // namespace

ProxyConnectionKey ProxyConnection::key() const { return {comm_id_, channel_, peer_, send_}; }

void ProxyConnection::advance(int stage, int64_t now_ns) {
  steps_[stage].fetch_add(1, std::memory_order_relaxed);
  moved_ns_[stage].store(now_ns, std::memory_order_relaxed);
}

void ProxyConnection::opStarted(int64_t) { ops_started_.fetch_add(1, std::memory_order_relaxed); }

void ProxyConnection::opDone(int64_t) { ops_done_.fetch_add(1, std::memory_order_relaxed); }

ProxyOpRecord* ProxyConnection::claimOp() {
  for (ProxyOpRecord& op : ops_) {
    bool expected = false;
    if (op.in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      op.connection = this;
      for (ProxyOpRecord::Step& s : op.steps) s = ProxyOpRecord::Step{};
      return &op;
    }
  }
  return nullptr;
}

ProxyConnection::View ProxyConnection::view() const {
  View v;
  v.key = key();
  v.rank = rank();
  v.nranks = nranks();
  v.ops_started = ops_started_.load(std::memory_order_relaxed);
  v.ops_done = ops_done_.load(std::memory_order_relaxed);
  v.untracked_ops = untracked_ops_.load(std::memory_order_relaxed);
  for (int i = 0; i < kProxyStages; ++i) {
    v.steps[i] = steps_[i].load(std::memory_order_relaxed);
    v.moved_ns[i] = moved_ns_[i].load(std::memory_order_relaxed);
  }
  return v;
}

ProxyConnection* ProxyProgress::connection(const ProxyConnectionKey& key, int rank, int nranks) {
  const uint64_t h = mix(key.comm_id ^ mix((static_cast<uint64_t>(key.channel) << 33) ^
                                           (static_cast<uint64_t>(static_cast<uint32_t>(key.peer)) << 1) ^
                                           static_cast<uint64_t>(key.send)));
  ProxyConnection* c = findOrClaim(
      connections_, h, [](ProxyConnection& c) -> std::atomic<int>& { return c.state_; },
      [&](const ProxyConnection& c) {
        return c.comm_id_ == key.comm_id && c.channel_ == key.channel && c.peer_ == key.peer && c.send_ == key.send;
      },
      [&](ProxyConnection& c) {
        c.comm_id_ = key.comm_id;
        c.channel_ = key.channel;
        c.peer_ = key.peer;
        c.send_ = key.send;
        c.rank_.store(rank, std::memory_order_relaxed);
        c.nranks_.store(nranks, std::memory_order_relaxed);
      });
  if (c == nullptr) dropped_connections_.fetch_add(1, std::memory_order_relaxed);
  return c;
}

KernelChannel* ProxyProgress::kernelChannel(uint64_t comm_id, int channel) {
  KernelChannel* k = findOrClaim(
      kernel_channels_, mix(comm_id ^ static_cast<uint64_t>(channel)),
      [](KernelChannel& k) -> std::atomic<int>& { return k.state; },
      [&](const KernelChannel& k) { return k.comm_id == comm_id && k.channel == channel; },
      [&](KernelChannel& k) {
        k.comm_id = comm_id;
        k.channel = channel;
      });
  if (k == nullptr) dropped_kernel_channels_.fetch_add(1, std::memory_order_relaxed);
  return k;
}

void ProxyProgress::collLaunched(uint64_t comm_id, const char* algo, int64_t now_ns) {
  CommAlgorithms* c = findOrClaim(
      comms_, mix(comm_id), [](CommAlgorithms& c) -> std::atomic<int>& { return c.state; },
      [&](const CommAlgorithms& c) { return c.comm_id == comm_id; }, [&](CommAlgorithms& c) { c.comm_id = comm_id; });
  if (c == nullptr) {
    dropped_comms_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int a = collAlgorithmIndex(algo);
  c->launched[a].fetch_add(1, std::memory_order_relaxed);
  c->last_ns[a].store(now_ns, std::memory_order_relaxed);
}

std::vector<ProxyConnection::View> ProxyProgress::connections() const {
  std::vector<ProxyConnection::View> out;
  for (const ProxyConnection& c : connections_)
    if (c.state_.load(std::memory_order_acquire) == kPublished) out.push_back(c.view());
  return out;
}

std::vector<ProxyProgress::KernelChannelView> ProxyProgress::kernelChannels() const {
  std::vector<KernelChannelView> out;
  for (const KernelChannel& k : kernel_channels_)
    if (k.state.load(std::memory_order_acquire) == kPublished)
      out.push_back({k.comm_id, k.channel, k.started.load(std::memory_order_relaxed),
                     k.stopped.load(std::memory_order_relaxed), k.started_ns.load(std::memory_order_relaxed),
                     k.stopped_ns.load(std::memory_order_relaxed)});
  return out;
}

std::vector<ProxyProgress::AlgorithmView> ProxyProgress::algorithms() const {
  std::vector<AlgorithmView> out;
  for (const CommAlgorithms& c : comms_) {
    if (c.state.load(std::memory_order_acquire) != kPublished) continue;
    for (int a = 0; a < kCollAlgorithms; ++a) {
      const uint64_t n = c.launched[a].load(std::memory_order_relaxed);
      if (n > 0) out.push_back({c.comm_id, kAlgorithmNames[a], n, c.last_ns[a].load(std::memory_order_relaxed)});
    }
  }
  return out;
}

void ProxyProgress::resetForTesting() {
  for (ProxyConnection& c : connections_) {
    c.state_.store(kFree);
    c.ops_started_.store(0);
    c.ops_done_.store(0);
    c.untracked_ops_.store(0);
    for (int i = 0; i < kProxyStages; ++i) {
      c.steps_[i].store(0);
      c.moved_ns_[i].store(0);
    }
    for (ProxyOpRecord& op : c.ops_) op.in_use.store(false);
  }
  for (KernelChannel& k : kernel_channels_) {
    k.state.store(kFree);
    k.started.store(0);
    k.stopped.store(0);
    k.started_ns.store(0);
    k.stopped_ns.store(0);
  }
  for (CommAlgorithms& c : comms_) {
    c.state.store(kFree);
    for (int a = 0; a < kCollAlgorithms; ++a) {
      c.launched[a].store(0);
      c.last_ns[a].store(0);
    }
  }
  dropped_connections_.store(0);
  dropped_kernel_channels_.store(0);
  dropped_comms_.store(0);
}

ProxyProgress& proxyProgress() {
  static ProxyProgress* table = new ProxyProgress;  // never destroyed: proxy threads outlive exit handlers
  return *table;
}

const char* const* proxyStageNames(bool send) { return send ? kSendStages : kRecvStages; }

const char* collAlgorithmName(int index) {
  return index >= 0 && index < kCollAlgorithms ? kAlgorithmNames[index] : kAlgorithmNames[kCollAlgorithms - 1];
}

int collAlgorithmIndex(const char* name) {
  if (name == nullptr) return kCollAlgorithms - 1;
  for (int a = 0; a < kCollAlgorithms - 1; ++a)
    if (std::strcmp(name, kAlgorithmNames[a]) == 0) return a;
  return kCollAlgorithms - 1;
}

}  // namespace hangwatch::watchdog
