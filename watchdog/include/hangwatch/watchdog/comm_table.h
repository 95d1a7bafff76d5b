#pragma once
// Every NCCL communicator this process created: identity for the snapshot and the
// per-communicator collective sequence numbers. Lookups on the hot path are
// lock-free scans of published entries; creation (rare) takes a mutex.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hangwatch::watchdog {

enum class CommState : uint8_t { kLive, kDestroyed, kAborted };

// One collective as the host issued it: the arguments every member must agree on.
struct IssuedOp {
  uint64_t seq = 0;
  const char* name = nullptr;  // static storage: the interposer's literal
  uint64_t count = 0;
  int dtype = -1;              // ncclDataType_t
  int root = -1;               // Broadcast/Reduce/Gather/Scatter; -1 otherwise or unknown
};

// The last kKept collectives issued on one communicator, slot seq % kKept: what this rank
// called at each position, so that the report can find where members first called different
// collectives (one more, or another size) even after some of them finished it. Written by
// the issuing thread, read by the snapshot; a slot is a seqlock (seq_plus1 0 while written).
class IssuedHistory {
 public:
  static constexpr size_t kKept = 16;

  void note(uint64_t seq, const char* name, uint64_t count, int dtype, int root) {
    Slot& s = slots_[seq % kKept];
    s.seq_plus1.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.name.store(name, std::memory_order_relaxed);
    s.count.store(count, std::memory_order_relaxed);
    s.dtype_root.store(pack(dtype, root), std::memory_order_relaxed);
    s.seq_plus1.store(seq + 1, std::memory_order_release);
  }
  // The records with seq < `issued` (a seq given back, as a captured group's, is not kept),
  // oldest first; a slot being written at that moment is left out.
  std::vector<IssuedOp> read(uint64_t issued) const;

 private:
  struct Slot {
    std::atomic<uint64_t> seq_plus1{0};
    std::atomic<const char*> name{nullptr};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> dtype_root{0};
  };
  static uint64_t pack(int dtype, int root) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(dtype)) << 32) | static_cast<uint32_t>(root);
  }
  Slot slots_[kKept];
};

// Sends and receives issued on one communicator, per peer (comm rank): the first kPeers
// peers it talks to (a pipeline stage has two, its neighbours); others are counted as
// untracked. What a stage sent and received lets the report say who skipped a transfer.
class P2pCounts {
 public:
  static constexpr int kPeers = 8;
  struct Peer {
    int peer = -1;
    uint64_t sends = 0;
    uint64_t receives = 0;
  };

  // Counts one; returns its number among the sends to (receives from) `peer`, from 1 (NCCL
  // matches a pair's transfers in that order), 0 when the peer is not counted.
  uint64_t note(int peer, bool send) {
    for (Slot& s : slots_) {
      int now = s.peer.load(std::memory_order_acquire);
      if (now == -1 && s.peer.compare_exchange_strong(now, peer, std::memory_order_acq_rel)) now = peer;
      if (now != peer) continue;
      return (send ? s.sends : s.receives).fetch_add(1, std::memory_order_relaxed) + 1;
    }
    untracked_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  // The peers talked to, in the order first seen.
  std::vector<Peer> read() const;
  uint64_t untracked() const { return untracked_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::atomic<int> peer{-1};
    std::atomic<uint64_t> sends{0};
    std::atomic<uint64_t> receives{0};
  };
  Slot slots_[kPeers];
  std::atomic<uint64_t> untracked_{0};
};

struct CommEntry {
  std::atomic<uintptr_t> handle{0};
  uint64_t hash = 0;
  // Known at creation, or filled in at the next operation on a communicator that was
  // still initializing when it was registered (identity_pending; comm_identity.h).
  std::atomic<int> rank{-1};
  std::atomic<int> size{0};
  std::atomic<int> device{-1};
  std::atomic<bool> identity_pending{false};
  std::atomic<bool> from_nccl{false};       // the handle is one NCCL returned: it may be passed back
  std::atomic<CommState> state{CommState::kLive};
  std::atomic<uint64_t> issued{0};          // collectives issued; the next one gets this seq
  std::atomic<uint64_t> completed_plus1{0}; // last completed seq + 1, 0 when none
  std::atomic<uint64_t> splits{0};          // ncclCommSplit calls on this parent, for child hashes
  std::atomic<uint64_t> nccl_id{0};         // NCCL's commHash, 0 until known (nccl_comm_ids.h)
  IssuedHistory recent;
  P2pCounts p2p;
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
  std::vector<IssuedOp> recent;  // oldest first
  std::vector<P2pCounts::Peer> p2p;
  uint64_t p2p_untracked = 0;
};

class CommTable {
 public:
  static constexpr size_t kCapacity = 1024;

  // nullptr when the table is full (the communicator then goes untracked).
  CommEntry* add(uintptr_t handle, uint64_t hash, int rank, int size, int device);
  // The newest entry for `handle` (handles are reused after destroy).
  CommEntry* find(uintptr_t handle);
  // Marked before the program's destroy or abort reaches NCCL, and never while forEachLive
  // is calling into a communicator: one marked ended is not touched again.
  void markEnded(uintptr_t handle, CommState state);
  std::vector<CommView> view() const;
  std::vector<uintptr_t> liveHandles() const;
  // Calls `f` for every entry (published ones only).
  template <typename F>
  void forEach(F&& f) {
    size_t n = count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) f(entries_[i]);
  }
  // Calls `f` for every live entry with no ending in progress: `f` may call NCCL on its handle.
  // False, calling nothing, when an ending holds the table past `patience` (a signal handler
  // that waits for this thread may have interrupted markEnded on its own thread).
  template <typename F>
  bool forEachLive(F&& f, std::chrono::milliseconds patience = std::chrono::milliseconds(200)) {
    // try_lock in a loop, not a timed mutex: ThreadSanitizer does not see pthread_mutex_clocklock.
    std::unique_lock<std::mutex> lock(ending_mutex_, std::defer_lock);
    const auto give_up = std::chrono::steady_clock::now() + patience;
    while (!lock.try_lock()) {
      if (std::chrono::steady_clock::now() >= give_up) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    forEach([&](CommEntry& e) {
      if (e.state.load(std::memory_order_acquire) == CommState::kLive) f(e);
    });
    return true;
  }

  static std::string hashHex(uint64_t hash);
  static uint64_t hashBytes(const void* data, size_t n, uint64_t seed = 1469598103934665603ull);

 private:
  std::mutex add_mutex_;
  std::mutex ending_mutex_;
  std::atomic<size_t> count_{0};
  CommEntry entries_[kCapacity];
};

}  // namespace hangwatch::watchdog
