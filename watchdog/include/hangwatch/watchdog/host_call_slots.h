#pragma once
// Which threads are inside an NCCL host call right now and since when. A thread
// blocked in ncclCommInitRank, ncclGroupEnd or a collective that blocks the host
// (simgpu's dead rank, NCCL's blocking init) shows up here, not in a stream queue.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "hangwatch/common/watchdog_snapshot.h"

namespace hangwatch::watchdog {

// The communicator an init call is forming (hash 0: the call forms none). Its hash is the one
// comms[].hash gets once the init returns, so ranks blocked in one init name the same one.
struct JoiningComm {
  uint64_t hash = 0;
  int rank = -1;
  int size = 0;
};

struct HostCallSlot {
  std::atomic<int64_t> enter_ns{0};  // 0 while the thread is outside NCCL
  std::atomic<const char*> call{""};
  std::atomic<uintptr_t> comm{0};
  std::atomic<uint64_t> seq_plus1{0};  // collective seq + 1, 0 when none
  std::atomic<pid_t> tid{0};
  std::atomic<uint64_t> joining_hash{0};
  std::atomic<int> joining_rank{-1};
  std::atomic<int> joining_size{0};
};

struct BusyHostCall {
  const char* call;
  uintptr_t comm;
  uint64_t seq_plus1;
  pid_t tid;
  int64_t enter_ns;
  JoiningComm joining;
};

class HostCallSlots {
 public:
  static constexpr size_t kCapacity = 256;

  // The calling thread's slot, claimed on first use; nullptr once all are taken.
  HostCallSlot* forThisThread();
  void forEachBusy(const std::function<void(const BusyHostCall&)>& fn) const;

  // The unique ids this process made (ncclGetUniqueId), by the hash JoiningComm holds: of ranks
  // inside init with different ids, the one a rank of this launch made is this launch's own.
  // The last kIdsKept are kept; lock-free.
  static constexpr size_t kIdsKept = WatchdogSnapshot::kUniqueIdsKept;
  void noteIdMade(uint64_t hash);
  std::vector<uint64_t> idsMade() const;

 private:
  std::atomic<size_t> claimed_{0};
  HostCallSlot slots_[kCapacity];
  std::atomic<uint64_t> ids_made_[kIdsKept] = {};
  std::atomic<size_t> ids_made_count_{0};
};

// Marks the calling thread as inside `call` for the scope's lifetime. Nests: only
// the outermost call is recorded (ncclBcast calling ncclBroadcast is one call).
class HostCallScope {
 public:
  HostCallScope(HostCallSlots* slots, const char* call, uintptr_t comm, uint64_t seq_plus1, int64_t now_ns,
                const JoiningComm& joining = {});
  ~HostCallScope();
  HostCallScope(const HostCallScope&) = delete;
  HostCallScope& operator=(const HostCallScope&) = delete;

 private:
  HostCallSlot* slot_ = nullptr;
};

}  // namespace hangwatch::watchdog
