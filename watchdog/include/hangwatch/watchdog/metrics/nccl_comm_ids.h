#pragma once
// NCCL's own id of each communicator (its commHash), which NCCL hands the profiler
// plugin's init and which debugger records and profiler progress are keyed by, tied to
// the communicator the watchdog saw created.
//
// NCCL calls init inside ncclCommInitRank*/ncclCommSplit/ncclCommShrink: on the
// creating thread for a blocking communicator made outside a group, on an NCCL thread
// otherwise (non-blocking, or several created in one group: src/group.cc). The
// creating interposer holds a Capture on its thread, and an init on that thread fills
// it; any other init is kept as a note, which the watchdog takes only when exactly one
// note and one communicator fit (same rank and size): never a guess.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace hangwatch::watchdog {

class NcclCommIds {
 public:
  static constexpr size_t kMaxNotes = 256;

  // Held by a creating interposer around NCCL's call.
  class Capture {
   public:
    Capture();
    ~Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;
    // The one id an init on this thread reported during the call; none if there was
    // none, or several (they were kept as notes).
    std::optional<uint64_t> id() const;

   private:
    friend class NcclCommIds;
    Capture* outer_;
    NcclCommIds* owner_ = nullptr;  // whose init filled it
    int inits_ = 0;
    uint64_t id_ = 0;
    int rank_ = -1, nranks_ = 0;
  };

  // From the plugin's init.
  void initSeen(uint64_t comm_id, int nranks, int rank);
  // The id of the one note for (rank, nranks), removed; none when there is no such note
  // or more than one.
  std::optional<uint64_t> takeUnique(int rank, int nranks);
  size_t pendingNotes() const;
  // Communicators NCCL initialised the plugin for, in this process.
  uint64_t initsSeen() const { return inits_seen_.load(std::memory_order_relaxed); }

 private:
  struct Note {
    uint64_t comm_id;
    int nranks, rank;
  };
  void keep(const Note& n);

  std::atomic<uint64_t> inits_seen_{0};
  mutable std::mutex mutex_;
  std::vector<Note> notes_;
};

NcclCommIds& ncclCommIds();

}  // namespace hangwatch::watchdog
