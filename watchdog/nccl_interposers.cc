// NCCL: every collective and p2p call is timed on its stream; calls inside
// ncclGroupStart/End are timed by events around the kernel ncclGroupEnd launches.
// Communicator creation records the comm's hash, rank, size and device; every
// call also marks its thread as "inside NCCL" for the host-call detector.
#include <nccl.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "hangwatch/watchdog/comm_identity.h"
#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/metrics/nccl_comm_ids.h"
#include "hangwatch/watchdog/last_error_guard.h"
#include "hangwatch/watchdog/next_symbol.h"
#include "hangwatch/watchdog/real_api.h"
#include "hangwatch/watchdog/reentry_guard.h"
#include "hangwatch/watchdog/watchdog.h"
#include "hangwatch/watchdog/watchdog_log.h"

using namespace hangwatch::watchdog;

namespace {

NextSymbol<decltype(&ncclAllReduce)> next_all_reduce{"ncclAllReduce"};
NextSymbol<decltype(&ncclAllGather)> next_all_gather{"ncclAllGather"};
NextSymbol<decltype(&ncclReduceScatter)> next_reduce_scatter{"ncclReduceScatter"};
NextSymbol<decltype(&ncclBroadcast)> next_broadcast{"ncclBroadcast"};
NextSymbol<decltype(&ncclBcast)> next_bcast{"ncclBcast"};
NextSymbol<decltype(&ncclReduce)> next_reduce{"ncclReduce"};
NextSymbol<decltype(&ncclAlltoAll)> next_all_to_all{"ncclAlltoAll"};
NextSymbol<decltype(&ncclGather)> next_gather{"ncclGather"};
NextSymbol<decltype(&ncclScatter)> next_scatter{"ncclScatter"};
NextSymbol<decltype(&ncclSend)> next_send{"ncclSend"};
NextSymbol<decltype(&ncclRecv)> next_recv{"ncclRecv"};
NextSymbol<decltype(&ncclGroupStart)> next_group_start{"ncclGroupStart"};
NextSymbol<decltype(&ncclGroupEnd)> next_group_end{"ncclGroupEnd"};
NextSymbol<decltype(&ncclGroupSimulateEnd)> next_group_simulate_end{"ncclGroupSimulateEnd"};
NextSymbol<decltype(&ncclGetUniqueId)> next_get_unique_id{"ncclGetUniqueId"};
NextSymbol<decltype(&ncclCommInitRank)> next_init_rank{"ncclCommInitRank"};
NextSymbol<decltype(&ncclCommInitRankConfig)> next_init_rank_config{"ncclCommInitRankConfig"};
NextSymbol<decltype(&ncclCommInitRankScalable)> next_init_scalable{"ncclCommInitRankScalable"};
NextSymbol<decltype(&ncclCommInitAll)> next_init_all{"ncclCommInitAll"};
NextSymbol<decltype(&ncclCommSplit)> next_split{"ncclCommSplit"};
NextSymbol<decltype(&ncclCommShrink)> next_shrink{"ncclCommShrink"};
NextSymbol<decltype(&ncclCommFinalize)> next_finalize{"ncclCommFinalize"};
NextSymbol<decltype(&ncclCommDestroy)> next_destroy{"ncclCommDestroy"};
NextSymbol<decltype(&ncclCommAbort)> next_abort{"ncclCommAbort"};
NextSymbol<decltype(&ncclCommGetAsyncError)> next_get_async_error{"ncclCommGetAsyncError"};

// Operations issued inside the calling thread's NCCL group, timed at its end.
struct GroupedOps {
  static constexpr int kMax = 256;
  int depth = 0;
  int count = 0;
  uint64_t overflow = 0;
  PendingOp ops[kMax];
};
// Allocated on a thread's first group only: most threads never issue NCCL calls.
GroupedOps& groupedOps() {
  thread_local std::unique_ptr<GroupedOps> ops;
  if (!ops) ops = std::make_unique<GroupedOps>();
  return *ops;
}

uintptr_t commKey(const ncclComm_t comm) { return reinterpret_cast<uintptr_t>(comm); }

int currentDevice() {
  LastErrorGuard keep;
  int dev = -1;
  if (auto get = RealApi::instance().getDevice.get()) get(&dev);
  return dev;
}

// The state of a non-blocking communicator with deferred operations, asked on the thread
// that uses it: ready means NCCL's thread launched them (their end events go behind).
void finishDeferredIfSettled(Watchdog* w, ncclComm_t comm) {
  auto async_error = RealApi::instance().commGetAsyncError.get();
  ncclResult_t state = ncclInProgress;
  if (async_error == nullptr || async_error(comm, &state) != ncclSuccess || state == ncclInProgress) return;
  w->finishDeferred(commKey(comm), state == ncclSuccess);
}

// Registers a communicator. What the creating call did not tell (split and shrink
// children) is asked of NCCL only once the communicator is ready: NCCL answers a
// communicator still initializing (non-blocking, or created inside a group) with a
// WARN line in the user's log (ncclCommEnsureReady), so the poller asks later.
void registerComm(Watchdog* w, ncclComm_t comm, uint64_t hash, int rank, int size, int device,
                  std::optional<uint64_t> nccl_id) {
  if (comm == nullptr) return;
  CommEntry* entry = w->comms().add(commKey(comm), hash, rank, size, device);
  if (entry == nullptr) {
    WatchdogLog::instance().failureOnce("comm-table", "too many communicators; later ones are not tracked");
    return;
  }
  if (nccl_id) entry->nccl_id.store(*nccl_id, std::memory_order_release);
  entry->from_nccl.store(true, std::memory_order_release);
  if (rank >= 0 && size > 0 && device >= 0) return;
  if (groupedOps().depth > 0 || !completeCommIdentity(*entry)) entry->identity_pending.store(true, std::memory_order_release);
}

// Child communicators hash from what every member agrees on: the parent, the kind
// of derivation, its generation on the parent, and the color.
uint64_t childHash(Watchdog* w, ncclComm_t parent, uint64_t kind, int64_t color) {
  CommEntry* p = w->comms().find(commKey(parent));
  uint64_t fields[4] = {p ? p->hash : 0, kind, p ? p->splits.fetch_add(1) + 1 : 0, static_cast<uint64_t>(color)};
  return CommTable::hashBytes(fields, sizeof fields);
}

struct CollectiveArgs {
  const char* name;
  OpClass cls;
  size_t count;
  ncclDataType_t dtype;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
  int root = -1;  // of a rooted collective (Broadcast, Reduce, Gather, Scatter)
};

template <typename Call>
ncclResult_t communicate(const CollectiveArgs& a, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  CommEntry* entry = w->comms().find(commKey(a.comm));
  if (entry && entry->identity_pending.load(std::memory_order_acquire) && completeCommIdentity(*entry))
    entry->identity_pending.store(false, std::memory_order_release);
  if (w->hasDeferred(commKey(a.comm))) finishDeferredIfSettled(w, a.comm);
  const bool collective = a.cls == OpClass::kCollective;
  const int64_t issued = monotonicNs();
  PendingOp op;
  op.op.cls = a.cls;
  op.op.name = a.name;
  op.op.host_issue_ns = issued;
  op.op.stream = reinterpret_cast<uint64_t>(a.stream);
  op.op.peer = a.peer;
  op.op.bytes = a.count * ncclDtypeSize(a.dtype);
  op.comm = commKey(a.comm);
  op.stream_handle = a.stream;
  op.dtype = a.dtype;
  op.count = a.count;
  if (entry) {
    op.op.comm_hash = entry->hash;
    op.op.comm_size = entry->size.load(std::memory_order_relaxed);
    op.op.comm_rank = entry->rank.load(std::memory_order_relaxed);
  }
  // The seq this call will get if it is accepted: what a host blocked in it is stuck at.
  const uint64_t next_seq = entry ? entry->issued.load(std::memory_order_relaxed) : 0;
  HostCallScope inside(&w->hostCalls(), a.name, commKey(a.comm), collective && entry ? next_seq + 1 : 0, issued);

  GroupedOps& grouped = groupedOps();
  const bool in_group = grouped.depth > 0;
  Watchdog::Timing t;
  const int entry_errno = errno;
  const int comm_device = entry ? entry->device.load(std::memory_order_relaxed) : -1;
  const bool timed = !in_group && w->beginTiming(a.stream, &t, comm_device);
  errno = entry_errno;
  ncclResult_t rc;
  {
    ReentryGuard guard;
    rc = call();
  }
  const int saved = errno;
  // Captured into a graph, nothing runs now: no seq; each replay takes one (graph_interposers.cc).
  if (rc == ncclSuccess && t.capture_id != 0) {
    w->graphs().noteCaptured(t.capture_id, CapturedOp{a.name, collective, commKey(a.comm), op.op.bytes, a.dtype,
                                                      a.count, a.peer});
    errno = saved;
    return rc;
  }
  // ncclInProgress (a non-blocking communicator): accepted, NCCL's own thread launches it.
  const bool accepted = rc == ncclSuccess || rc == ncclInProgress;
  if (accepted && collective && entry) {
    op.op.seq = entry->issued.fetch_add(1, std::memory_order_acq_rel);
    entry->recent.note(op.op.seq, a.name, a.count, a.dtype, a.root);
  } else if (accepted && entry && a.cls == OpClass::kP2P && a.peer >= 0) {
    // A transfer's number between the pair: its timeline record matches send k with receive k.
    op.op.seq = entry->p2p.note(a.peer, std::strcmp(a.name, "ncclSend") == 0);
  }
  if (in_group) {
    if (rc == ncclSuccess) {
      if (grouped.count < GroupedOps::kMax)
        grouped.ops[grouped.count++] = op;
      else
        ++grouped.overflow;
    }
  } else if (timed) {
    if (rc == ncclSuccess)
      w->endTiming(t, a.stream, op);
    else if (rc == ncclInProgress)
      w->deferTiming(commKey(a.comm), t, op);
    else
      w->abandonTiming(t);
  }
  errno = saved;
  return rc;
}

template <typename Call>
ncclResult_t hostCall(const char* name, ncclComm_t comm, Call&& call, const JoiningComm& joining = {}) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  HostCallScope inside(&w->hostCalls(), name, commKey(comm), 0, monotonicNs(), joining);
  ReentryGuard guard;
  return call();
}

ncclResult_t missing() { return ncclSystemError; }

}  // namespace

extern "C" {

// The rank that makes a communicator's unique id starts the watchdog (so does cudaSetDevice).
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  auto real = next_get_unique_id.get();
  if (!real) return missing();
  ncclResult_t rc = real(uniqueId);
  if (!ReentryGuard::nested()) {
    Watchdog::startFromPassThrough();
    if (Watchdog* w = Watchdog::get(); w != nullptr && rc == ncclSuccess && uniqueId != nullptr)
      w->hostCalls().noteIdMade(CommTable::hashBytes(uniqueId, sizeof *uniqueId));
  }
  return rc;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  auto real = next_all_reduce.get();
  if (!real) return missing();
  return communicate({"ncclAllReduce", OpClass::kCollective, count, datatype, -1, comm, stream},
                     [&] { return real(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  auto real = next_all_gather.get();
  if (!real) return missing();
  return communicate({"ncclAllGather", OpClass::kCollective, sendcount, datatype, -1, comm, stream},
                     [&] { return real(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  auto real = next_reduce_scatter.get();
  if (!real) return missing();
  return communicate({"ncclReduceScatter", OpClass::kCollective, recvcount, datatype, -1, comm, stream},
                     [&] { return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  auto real = next_broadcast.get();
  if (!real) return missing();
  return communicate({"ncclBroadcast", OpClass::kCollective, count, datatype, -1, comm, stream, root},
                     [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  auto real = next_bcast.get();
  if (!real) return missing();
  return communicate({"ncclBcast", OpClass::kCollective, count, datatype, -1, comm, stream, root},
                     [&] { return real(buff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  auto real = next_reduce.get();
  if (!real) return missing();
  return communicate({"ncclReduce", OpClass::kCollective, count, datatype, -1, comm, stream, root},
                     [&] { return real(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  auto real = next_all_to_all.get();
  if (!real) return missing();
  return communicate({"ncclAlltoAll", OpClass::kCollective, count, datatype, -1, comm, stream},
                     [&] { return real(sendbuff, recvbuff, count, datatype, comm, stream); });
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  auto real = next_gather.get();
  if (!real) return missing();
  return communicate({"ncclGather", OpClass::kCollective, count, datatype, -1, comm, stream, root},
                     [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  auto real = next_scatter.get();
  if (!real) return missing();
  return communicate({"ncclScatter", OpClass::kCollective, count, datatype, -1, comm, stream, root},
                     [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  auto real = next_send.get();
  if (!real) return missing();
  return communicate({"ncclSend", OpClass::kP2P, count, datatype, peer, comm, stream},
                     [&] { return real(sendbuff, count, datatype, peer, comm, stream); });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  auto real = next_recv.get();
  if (!real) return missing();
  return communicate({"ncclRecv", OpClass::kP2P, count, datatype, peer, comm, stream},
                     [&] { return real(recvbuff, count, datatype, peer, comm, stream); });
}

ncclResult_t ncclGroupStart() {
  auto real = next_group_start.get();
  if (!real) return missing();
  ncclResult_t rc = real();
  const int saved = errno;
  if (rc == ncclSuccess && Watchdog::get() != nullptr && !ReentryGuard::nested()) ++groupedOps().depth;
  errno = saved;
  return rc;
}

ncclResult_t ncclGroupEnd() {
  auto real = next_group_end.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real();
  GroupedOps& grouped = groupedOps();
  if (grouped.depth == 0) return real();
  if (--grouped.depth > 0) return real();
  // The outermost end launches the kernels: bracket that, per grouped operation.
  Watchdog::Timing timings[GroupedOps::kMax];
  bool timed[GroupedOps::kMax];
  const int n = grouped.count;
  const int entry_errno = errno;
  for (int i = 0; i < n; ++i) {
    CommEntry* entry = w->comms().find(grouped.ops[i].comm);
    const int comm_device = entry ? entry->device.load(std::memory_order_relaxed) : -1;
    timed[i] = w->beginTiming(grouped.ops[i].stream_handle, &timings[i], comm_device);
  }
  errno = entry_errno;
  ncclResult_t rc;
  {
    HostCallScope inside(&w->hostCalls(), "ncclGroupEnd", n > 0 ? grouped.ops[0].comm : 0, 0, monotonicNs());
    ReentryGuard guard;
    rc = real();
  }
  const int saved = errno;
  for (int i = 0; i < n; ++i) {
    PendingOp& op = grouped.ops[i];
    if (rc == ncclSuccess && timings[i].capture_id != 0) {
      // The group was captured: its collectives give back the seqs they took when issued.
      const bool collective = op.op.cls == OpClass::kCollective;
      w->graphs().noteCaptured(timings[i].capture_id,
                               CapturedOp{op.op.name, collective, op.comm, op.op.bytes, op.dtype, op.count, op.op.peer});
      if (collective)
        if (CommEntry* entry = w->comms().find(op.comm)) entry->issued.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (!timed[i]) continue;
    if (rc == ncclSuccess)
      w->endTiming(timings[i], op.stream_handle, op);
    else if (rc == ncclInProgress)  // non-blocking: NCCL's thread launches the group later
      w->deferTiming(op.comm, timings[i], op);
    else
      w->abandonTiming(timings[i]);
  }
  grouped.count = 0;
  errno = saved;
  return rc;
}

// Ends the group like ncclGroupEnd but runs nothing (NCCL's group.cc skips the launches):
// the grouped operations are dropped untimed, and the seqs their collectives took are
// given back (NCCL forbids using one communicator from two threads at once).
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  auto real = next_group_simulate_end.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(simInfo);
  GroupedOps& grouped = groupedOps();
  ncclResult_t rc;
  {
    ReentryGuard guard;
    rc = real(simInfo);
  }
  const int saved = errno;
  if (grouped.depth > 0 && --grouped.depth == 0) {
    for (int i = grouped.count; i-- > 0;) {
      const PendingOp& op = grouped.ops[i];
      if (op.op.cls != OpClass::kCollective) continue;
      if (CommEntry* entry = w->comms().find(op.comm)) entry->issued.fetch_sub(1, std::memory_order_acq_rel);
    }
    grouped.count = 0;
  }
  errno = saved;
  return rc;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  auto real = next_init_rank.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(comm, nranks, commId, rank);
  NcclCommIds::Capture capture;  // NCCL's id, if its profiler init runs on this thread
  ncclResult_t rc = hostCall("ncclCommInitRank", nullptr, [&] { return real(comm, nranks, commId, rank); },
                             JoiningComm{CommTable::hashBytes(&commId, sizeof commId), rank, nranks});
  const int saved = errno;
  if (rc == ncclSuccess && comm)
    registerComm(w, *comm, CommTable::hashBytes(&commId, sizeof commId), rank, nranks, currentDevice(),
                 capture.id());
  errno = saved;
  return rc;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  auto real = next_init_rank_config.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(comm, nranks, commId, rank, config);
  NcclCommIds::Capture capture;  // NCCL's id, if its profiler init runs on this thread
  ncclResult_t rc =
      hostCall("ncclCommInitRankConfig", nullptr, [&] { return real(comm, nranks, commId, rank, config); },
               JoiningComm{CommTable::hashBytes(&commId, sizeof commId), rank, nranks});
  const int saved = errno;
  if ((rc == ncclSuccess || rc == ncclInProgress) && comm)
    registerComm(w, *comm, CommTable::hashBytes(&commId, sizeof commId), rank, nranks, currentDevice(),
                 capture.id());
  errno = saved;
  return rc;
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  auto real = next_init_scalable.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(newcomm, nranks, myrank, nId, commIds, config);
  NcclCommIds::Capture capture;  // NCCL's id, if its profiler init runs on this thread
  ncclResult_t rc = hostCall(
      "ncclCommInitRankScalable", nullptr, [&] { return real(newcomm, nranks, myrank, nId, commIds, config); },
      commIds && nId > 0 ? JoiningComm{CommTable::hashBytes(commIds, sizeof(ncclUniqueId)), myrank, nranks}
                         : JoiningComm{});
  const int saved = errno;
  if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm && commIds && nId > 0)
    registerComm(w, *newcomm, CommTable::hashBytes(commIds, sizeof(ncclUniqueId)), myrank, nranks, currentDevice(),
                 capture.id());
  errno = saved;
  return rc;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  auto real = next_init_all.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(comms, ndev, devlist);
  ncclResult_t rc = hostCall("ncclCommInitAll", nullptr, [&] { return real(comms, ndev, devlist); });
  const int saved = errno;
  if (rc == ncclSuccess && comms) {
    // Single-process communicator: unique within this process is all that is needed.
    static std::atomic<uint64_t> generation{0};
    uint64_t fields[3] = {0x696e6974616c6cull, static_cast<uint64_t>(::getpid()), ++generation};
    uint64_t hash = CommTable::hashBytes(fields, sizeof fields);
    // NCCL initialises them on its own threads: their ids are tied later (comm_identity.h).
    for (int i = 0; i < ndev; ++i) registerComm(w, comms[i], hash, i, ndev, devlist ? devlist[i] : i, std::nullopt);
  }
  errno = saved;
  return rc;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  auto real = next_split.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(comm, color, key, newcomm, config);
  const uint64_t hash = childHash(w, comm, 0x73706c6974ull, color);
  NcclCommIds::Capture capture;  // NCCL's id, if its profiler init runs on this thread
  ncclResult_t rc = hostCall("ncclCommSplit", comm, [&] { return real(comm, color, key, newcomm, config); });
  const int saved = errno;
  if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm && *newcomm)
    registerComm(w, *newcomm, hash, -1, 0, -1, capture.id());
  errno = saved;
  return rc;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  auto real = next_shrink.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested())
    return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  const uint64_t hash = childHash(w, comm, 0x736872696e6bull, excludeRanksCount);
  NcclCommIds::Capture capture;  // NCCL's id, if its profiler init runs on this thread
  ncclResult_t rc = hostCall("ncclCommShrink", comm, [&] {
    return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  });
  const int saved = errno;
  if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm && *newcomm)
    registerComm(w, *newcomm, hash, -1, 0, -1, capture.id());
  errno = saved;
  return rc;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  auto real = next_finalize.get();
  if (!real) return missing();
  return hostCall("ncclCommFinalize", comm, [&] { return real(comm); });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  auto real = next_get_async_error.get();
  if (!real) return missing();
  ncclResult_t rc = real(comm, asyncError);
  Watchdog* w = Watchdog::active() ? Watchdog::get() : nullptr;
  if (w != nullptr && !ReentryGuard::nested() && rc == ncclSuccess && asyncError != nullptr &&
      *asyncError != ncclInProgress && w->hasDeferred(commKey(comm))) {
    const int saved = errno;
    w->finishDeferred(commKey(comm), *asyncError == ncclSuccess);
    errno = saved;
  }
  return rc;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  auto real = next_destroy.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(comm);
  w->finishDeferred(commKey(comm), false);
  w->comms().markEnded(commKey(comm), CommState::kDestroyed);
  return hostCall("ncclCommDestroy", comm, [&] { return real(comm); });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  auto real = next_abort.get();
  if (!real) return missing();
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(comm);
  // A framework aborting a communicator with a collective pending declared a hang: this rank
  // dumps before the abort goes on (declared_hang.h).
  w->holdForDeclaredHang(DeclaredHang::How::kCommAbort, commKey(comm));
  w->finishDeferred(commKey(comm), false);
  w->comms().markEnded(commKey(comm), CommState::kAborted);
  return hostCall("ncclCommAbort", comm, [&] { return real(comm); });
}

}  // extern "C"
