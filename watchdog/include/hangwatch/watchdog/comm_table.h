#pragma once
// Every NCCL communicator this process created: identity for the snapshot and the
// per-communicator collective sequence numbers. Lookups on the hot path are
// lock-free scans of published entries; creation (rare) takes a mutex.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace hangwatch::watchdog {

enum class CommState : uint8_t { kLive, kDestroyed, kAborted };

struct CommEntry {
  std::atomic<uintptr_t> handle{0};
  uint64_t hash = 0;
  // Known at creation, or filled in at the next operation on a communicator that was
  // still initializing when it was registered (identity_pending; comm_identity.h).
  std::atomic<int> rank{-1};
  std::atomic<int> size{0};
  std::atomic<int> device{-1};
  std::atomic<bool> identity_pending{false};
  std::atomic<CommState> state{CommState::kLive};
  std::atomic<uint64_t> issued{0};          // collectives issued; the next one gets this seq
  std::atomic<uint64_t> completed_plus1{0}; // last completed seq + 1, 0 when none
  std::atomic<uint64_t> splits{0};          // ncclCommSplit calls on this parent, for child hashes
  std::atomic<uint64_t> nccl_id{0};         // NCCL's commHash, 0 until known (nccl_comm_ids.h)
};

// What the snapshot needs of one communicator, copied out.
struct CommView {
  uintptr_t handle = 0;
  uint64_t hash = 0;
  int rank = -1, size = 0, device = -1;
  CommState state = CommState::kLive;
  uint64_t issued = 0;
  uint64_t completed_plus1 = 0;
  uint64_t nccl_id = 0;
};

class CommTable {
 public:
  static constexpr size_t kCapacity = 1024;

  // nullptr when the table is full (the communicator then goes untracked).
  CommEntry* add(uintptr_t handle, uint64_t hash, int rank, int size, int device);
  // The newest entry for `handle` (handles are reused after destroy).
  CommEntry* find(uintptr_t handle);
  void markEnded(uintptr_t handle, CommState state);
  std::vector<CommView> view() const;
  std::vector<uintptr_t> liveHandles() const;
  // Calls `f` for every entry (published ones only).
  template <typename F>
  void forEach(F&& f) {
    size_t n = count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) f(entries_[i]);
  }

  static std::string hashHex(uint64_t hash);
  static uint64_t hashBytes(const void* data, size_t n, uint64_t seed = 1469598103934665603ull);

 private:
  std::mutex add_mutex_;
  std::atomic<size_t> count_{0};
  CommEntry entries_[kCapacity];
};

}  // namespace hangwatch::watchdog
