#include "hangwatch/watchdog/comm_table.h"

#include <algorithm>

#include <fmt/format.h>

namespace hangwatch::watchdog {

CommEntry* CommTable::add(uintptr_t handle, uint64_t hash, int rank, int size, int device) {
  std::lock_guard<std::mutex> lock(add_mutex_);
  size_t n = count_.load(std::memory_order_relaxed);
  if (n == kCapacity) return nullptr;
  CommEntry& e = entries_[n];
  e.hash = hash;
  e.rank.store(rank, std::memory_order_relaxed);
  e.size.store(size, std::memory_order_relaxed);
  e.device.store(device, std::memory_order_relaxed);
  e.handle.store(handle, std::memory_order_relaxed);
  count_.store(n + 1, std::memory_order_release);
  return &e;
}

CommEntry* CommTable::find(uintptr_t handle) {
  for (size_t i = count_.load(std::memory_order_acquire); i-- > 0;)
    if (entries_[i].handle.load(std::memory_order_relaxed) == handle) return &entries_[i];
  return nullptr;
}

void CommTable::markEnded(uintptr_t handle, CommState state) {
  std::lock_guard<std::mutex> lock(ending_mutex_);
  if (CommEntry* e = find(handle)) e->state.store(state, std::memory_order_release);
}

std::vector<CommView> CommTable::view() const {
  std::vector<CommView> out;
  size_t n = count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    const CommEntry& e = entries_[i];
    out.push_back({e.handle.load(std::memory_order_relaxed), e.hash, e.rank.load(std::memory_order_relaxed),
                   e.size.load(std::memory_order_relaxed), e.device.load(std::memory_order_relaxed),
                   e.state.load(std::memory_order_acquire), e.issued.load(std::memory_order_acquire),
                   e.completed_plus1.load(std::memory_order_acquire), e.nccl_id.load(std::memory_order_acquire), {}, {}, 0});
    out.back().recent = e.recent.read(out.back().issued);
    out.back().p2p = e.p2p.read();
    out.back().p2p_untracked = e.p2p.untracked();
  }
  return out;
}

std::vector<P2pCounts::Peer> P2pCounts::read() const {
  std::vector<Peer> out;
  for (const Slot& s : slots_) {
    const int peer = s.peer.load(std::memory_order_acquire);
    if (peer < 0) break;  // slots are claimed in order
    out.push_back({peer, s.sends.load(std::memory_order_relaxed), s.receives.load(std::memory_order_relaxed)});
  }
  return out;
}

std::vector<IssuedOp> IssuedHistory::read(uint64_t issued) const {
  std::vector<IssuedOp> out;
  for (const Slot& s : slots_) {
    const uint64_t before = s.seq_plus1.load(std::memory_order_acquire);
    IssuedOp op;
    op.name = s.name.load(std::memory_order_relaxed);
    op.count = s.count.load(std::memory_order_relaxed);
    const uint64_t packed = s.dtype_root.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before == 0 || s.seq_plus1.load(std::memory_order_relaxed) != before || before > issued) continue;
    op.seq = before - 1;
    op.dtype = static_cast<int>(static_cast<uint32_t>(packed >> 32));
    op.root = static_cast<int>(static_cast<uint32_t>(packed));
    if (op.name != nullptr) out.push_back(op);
  }
  std::sort(out.begin(), out.end(), [](const IssuedOp& a, const IssuedOp& b) { return a.seq < b.seq; });
  return out;
}

std::vector<uintptr_t> CommTable::liveHandles() const {
  std::vector<uintptr_t> out;
  for (const CommView& v : view())
    if (v.state == CommState::kLive) out.push_back(v.handle);
  return out;
}

std::string CommTable::hashHex(uint64_t hash) {
  return fmt::format("{:016x}", hash);
}

uint64_t CommTable::hashBytes(const void* data, size_t n, uint64_t seed) {
  // FNV-1a: stable across processes and hosts, which is all the report needs.
  uint64_t h = seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace hangwatch::watchdog
