// The NCCL API of simnccl: argument checks with NCCL's error codes, then
// communicators (communicator.cc) and launches (group.cc).
#include <nccl.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/simgpu/nccl/api_profile.h"
#include "hangwatch/simgpu/nccl/comm_handle.h"
#include "hangwatch/simgpu/nccl/comm_init_log.h"
#include "hangwatch/simgpu/nccl/debug_log.h"
#include "hangwatch/simgpu/nccl/net_devices.h"
#include "hangwatch/simgpu/nccl/profiler_hooks.h"
#include "hangwatch/simgpu/config.h"
#include "hangwatch/simgpu/faults.h"
#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/group.h"
#include "hangwatch/simgpu/nccl/reduction.h"
#include "hangwatch/simgpu/runtime.h"
#include "hangwatch/simgpu/nccl/unique_id.h"


namespace simnccl {
namespace {

ncclResult_t fail(ncclResult_t code, const std::string& message) {
  setLastError(message);
  return code;
}

// ncclConfig_t's commName, which NCCL hands to a profiler plugin's init (NULL when unset).
struct CommName {
  bool set = false;
  std::string name;
  const char* get() const { return set ? name.c_str() : nullptr; }
};

CommName commNameOf(const ncclConfig_t* config) {
  if (config == nullptr || config->commName == NCCL_CONFIG_UNDEF_PTR) return {};
  return {true, config->commName};
}

bool processGone(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return true;
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z' || line[close + 2] == 'X';
}

// Every rank first connects to the bootstrap root, a thread of the process that made the id
// (bootstrap.cc). When that process is gone, as with an id an earlier launch left in a store
// the launcher kept (torchrun's shared TCPStore across restarts: pytorch#135712, #167288), the
// connect is refused; misc/socket.cc retries NCCL_SOCKET_RETRY_CNT times (34), sleeping
// n x NCCL_SOCKET_RETRY_SLEEP_MSEC (100 ms) before the n-th, about a minute, then gives
// ncclRemoteError with this WARN.
ncclResult_t connectToBootstrapRoot(const std::string& segment_name) {
  const auto root = bootstrapRootPid(segment_name);
  if (!root || !processGone(*root)) return ncclSuccess;
  const int64_t retries = simgpu::ncclParam("NCCL_SOCKET_RETRY_CNT", 34);
  const int64_t sleep_ms = simgpu::ncclParam("NCCL_SOCKET_RETRY_SLEEP_MSEC", 100);
  for (int64_t attempt = 1; attempt <= retries; ++attempt)
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt * sleep_ms));
  return fail(ncclRemoteError,
              fmt::format("bootstrapInit: connect to the bootstrap root (pid {}, gone) returned Connection refused, "
                          "exceeded error retry count after {} attempts",
                          *root, retries + 1));
}

// ncclCommInitRankFunc's lines: the net's devices at the process's first init (ncclNetInit in
// commAlloc, src/init.cc:421), "Init START" before the bootstrap, "Init COMPLETE" after.
ncclResult_t joinInto(ncclComm* handle, ncclUniqueId id, int nranks, int rank, int device, bool nonblocking,
                      const CommName& name, const CommInitCaller& caller) {
  if (ncclResult_t r = connectToBootstrapRoot(*segmentNameFromId(id)); r != ncclSuccess) return r;
  if (auto net = netFromEnvironment()) logNetDevices(*net, device);
  const CommInitLine line{handle, rank, nranks, device, communicatorId(segmentNameFromId(id)->c_str())};
  logCommInit(caller, line, false);
  auto joined = Communicator::join(id, nranks, rank, device, name.get());
  if (!joined) return fail(ncclInvalidArgument, "ncclCommInitRank: " + joined.error());
  (*joined)->nonblocking.store(nonblocking);
  handle->state = std::move(*joined);
  handle->segment_name = *segmentNameFromId(id);
  logCommInit(caller, line, true);
  return ncclSuccess;
}

bool blockingConfig(const ncclConfig_t* config) {
  return config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
}

// Non-blocking: ncclInProgress now, the init on simnccl's own thread (NCCL's async job).
ncclResult_t initRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, int device, bool nonblocking = false,
                      const CommName& name = {}, const CommInitCaller& caller = {}) {
  if (caller.parent == nullptr) showVersionOnce(rank);  // ncclCommInitRankDev, src/init.cc:1977
  if (out == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm argument is NULL");
  if (nranks < 1) return fail(ncclInvalidArgument, fmt::format("ncclCommInitRank: invalid nranks {}", nranks));
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, fmt::format("ncclCommInitRank: rank {} not in [0, {})", rank, nranks));
  if (auto name = segmentNameFromId(id); !name) return fail(ncclInvalidArgument, "ncclCommInitRank: " + name.error());
  auto* handle = new ncclComm();
  *out = handle;
  if (inGroup()) {
    deferInit([=] { return joinInto(handle, id, nranks, rank, device, nonblocking, name, caller); });
    return ncclSuccess;
  }
  if (nonblocking) {
    handle->init->store(ncclInProgress);
    std::thread([handle, init = handle->init, id, nranks, rank, device, name, caller] {
      init->store(joinInto(handle, id, nranks, rank, device, true, name, caller), std::memory_order_release);
    }).detach();
    return ncclInProgress;
  }
  ncclResult_t r = joinInto(handle, id, nranks, rank, device, false, name, caller);
  if (r != ncclSuccess) {
    delete handle;
    *out = nullptr;
  }
  return r;
}

// ncclCommCount/CuDevice/UserRank as NCCL 2.28 checks them (init.cc: CommCheck, PtrCheck,
// ncclCommEnsureReady): a communicator still initializing (created in a group that has
// not ended) is a WARN and ncclInvalidArgument.
// Ready: no init or non-blocking operation of the communicator still in progress.
bool ready(const ncclComm* comm) {
  if (comm->init->load(std::memory_order_acquire) == ncclInProgress || !comm->state) return false;
  return comm->state->pending.load(std::memory_order_acquire) != ncclInProgress;
}

ncclResult_t checkQuery(const ncclComm* comm, const void* out, const char* fn, const char* out_name) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(fn) + " : comm argument is NULL");
  if (out == nullptr) return fail(ncclInvalidArgument, std::string(fn) + " : " + out_name + " argument is NULL");
  if (!ready(comm)) return fail(ncclInvalidArgument, "Attempt to use communicator before the previous operation returned ncclSuccess");
  return ncclSuccess;
}

ncclResult_t checkComm(const ncclComm* comm, const char* fn) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(fn) + ": comm is NULL");
  if (comm->init->load(std::memory_order_acquire) == ncclInProgress ||
      (comm->state && comm->state->pending.load(std::memory_order_acquire) == ncclInProgress))
    return fail(ncclInvalidArgument, "Attempt to use communicator before the previous operation returned ncclSuccess");
  if (!comm->state) return fail(ncclInvalidUsage, std::string(fn) + ": communicator is not initialized");
  if (comm->state->aborted()) return fail(ncclInvalidUsage, std::string(fn) + ": communicator was aborted");
  if (comm->revoked) return fail(ncclInvalidUsage, std::string(fn) + ": communicator was revoked");
  return ncclSuccess;
}

// NCCL refuses a config not made with NCCL_CONFIG_INITIALIZER (init.cc, parseCommConfig).
ncclResult_t checkConfig(const ncclConfig_t* config, const char* fn) {
  if (config == nullptr) return ncclSuccess;
  constexpr unsigned kConfigMagic = 0xcafebeef;
  if (config->magic != kConfigMagic)
    return fail(ncclInvalidArgument, std::string(fn) + ": ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
  return ncclSuccess;
}

ncclResult_t appendTask(const char* fn, OpKind kind, const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t dtype, ncclRedOp_t redop, int root, int peer, ncclComm_t comm,
                        cudaStream_t stream);

// ncclEnqueueCheck: a call is a group of its own (inside the caller's group, if any), so
// its task is launched at that group's end.
ncclResult_t openImplicitGroup(ncclComm_t comm, const char* fn) {
  if (ncclResult_t r = checkComm(comm, fn); r != ncclSuccess) return r;
  api_profile::enqueueCheck();
  return groupStart();
}

ncclResult_t closeImplicitGroup(ncclResult_t appended) {
  const ncclResult_t end = groupEnd();
  return appended != ncclSuccess ? appended : end;
}

// The arguments are passed on by value: a datatype or operator out of its enum's range
// (a caller's mistake NCCL answers with an error) is never loaded from memory as an enum.
ncclResult_t enqueueOp(const char* fn, OpKind kind, const void* sendbuff, void* recvbuff, size_t count,
                       ncclDataType_t dtype, ncclRedOp_t redop, int root, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  if (ncclResult_t r = openImplicitGroup(comm, fn); r != ncclSuccess) return r;
  return closeImplicitGroup(appendTask(fn, kind, sendbuff, recvbuff, count, dtype, redop, root, peer, comm, stream));
}

// Gather, Scatter and AlltoAll are point-to-point operations in one group, as NCCL 2.28
// builds them; inside a caller's group they join it.
template <typename Body>
ncclResult_t asP2pGroup(ncclComm_t comm, const char* fn, Body&& body) {
  if (ncclResult_t r = openImplicitGroup(comm, fn); r != ncclSuccess) return r;
  return closeImplicitGroup(body(comm->state->nranks(), comm->state->rank()));
}

// collTaskAppend / p2pTaskAppend: the checked operation joins the current group.
ncclResult_t appendTask(const char* fn, OpKind kind, const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t dtype, ncclRedOp_t redop, int root, int peer, ncclComm_t comm,
                        cudaStream_t stream) {
  if (ncclResult_t r = checkComm(comm, fn); r != ncclSuccess) return r;
  const Communicator& c = *comm->state;
  if (dtypeSize(dtype) == 0) return fail(ncclInvalidArgument, fmt::format("{}: unsupported datatype {}", fn, static_cast<int>(dtype)));
  std::shared_ptr<const PreMulSum> premul;
  if (isCollective(kind) && kind != OpKind::AllGather && kind != OpKind::Broadcast && !supportedRedOp(redop)) {
    premul = comm->redops.find(redop);
    if (!premul) return fail(ncclInvalidArgument, fmt::format("{}: invalid reduction op {}", fn, static_cast<int>(redop)));
    if (premul->dtype != dtype)
      return fail(ncclInvalidArgument, fmt::format("{}: reduction op {} was made for another datatype", fn,
                                                       static_cast<int>(redop)));
  }
  bool needs_send = kind != OpKind::Recv && !(kind == OpKind::Broadcast && c.rank() != root);
  bool needs_recv = kind != OpKind::Send && !(kind == OpKind::Reduce && c.rank() != root);
  if (count > 0 && ((needs_send && sendbuff == nullptr) || (needs_recv && recvbuff == nullptr)))
    return fail(ncclInvalidArgument, std::string(fn) + ": buffer is NULL");
  if ((kind == OpKind::Broadcast || kind == OpKind::Reduce) && (root < 0 || root >= c.nranks()))
    return fail(ncclInvalidArgument, fmt::format("{}: invalid root {}", fn, root));
  if (!isCollective(kind) && (peer < 0 || peer >= c.nranks()))
    return fail(ncclInvalidArgument, fmt::format("{}: invalid peer {}", fn, peer));
  Op op{kind, sendbuff, recvbuff, count, dtype, redop, root, peer, 0, stream, comm->state, premul};
  if (isCollective(kind)) {
    const bool per_rank = kind == OpKind::AllGather || kind == OpKind::ReduceScatter;
    const size_t nbytes = count * dtypeSize(dtype) * (per_rank ? static_cast<size_t>(c.nranks()) : 1);
    auto algo = c.algorithms().choose(kind, nbytes, CommShape{c.nranks(), c.nodes().nodes()},
                                      redop == ncclAvg || premul != nullptr);
    if (!algo) return fail(ncclInvalidUsage, std::string(fn) + ": " + algo.error());
    op.algo = *algo;
    op.seq = comm->state->nextCollectiveSeq();
  }
  if (!isCollective(kind))
    op.registered = insideRegisteredBuffer(*comm, kind == OpKind::Send ? sendbuff : recvbuff, count * dtypeSize(dtype));
  api_profile::taskAppend(comm->state->profilerHooks(), op, groupDepth(), simgpu::isCapturing(stream));
  return submit(std::move(op));
}

}  // namespace
}  // namespace simnccl

using namespace simnccl;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  *id = makeUniqueId();
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return initRank(comm, nranks, id, rank, simgpu::currentDevice());
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (ncclResult_t r = checkConfig(config, "ncclCommInitRankConfig"); r != ncclSuccess) return r;
  return initRank(comm, nranks, id, rank, simgpu::currentDevice(), !blockingConfig(config), commNameOf(config),
                  {"ncclCommInitRankConfig"});
}

// Several unique ids only speed NCCL's bootstrap up; every rank passes the same list.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId must be >= 1 and commIds not NULL");
  if (ncclResult_t r = checkConfig(config, "ncclCommInitRankScalable"); r != ncclSuccess) return r;
  return initRank(newcomm, nranks, commIds[0], myrank, simgpu::currentDevice(), !blockingConfig(config),
                  commNameOf(config), {"ncclCommInitRankScalable"});
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
  if (ndev < 1) return fail(ncclInvalidArgument, fmt::format("ncclCommInitAll: invalid ndev {}", ndev));
  ncclUniqueId id = makeUniqueId();
  groupStart();
  for (int i = 0; i < ndev; ++i) {
    int device = devlist ? devlist[i] : i;
    if (ncclResult_t r = initRank(&comms[i], ndev, id, i, device, false, {}, {"ncclCommInitAll"}); r != ncclSuccess) {
      groupEnd();
      return r;
    }
  }
  return groupEnd();
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (ncclResult_t r = checkComm(comm, "ncclCommSplit"); r != ncclSuccess) return r;
  if (ncclResult_t r = checkConfig(config, "ncclCommSplit"); r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  auto members = comm->state->exchangeSplit(color, key);
  if (!members) return fail(ncclSystemError, "ncclCommSplit: " + members.error());
  int generation = ++comm->split_count;
  if (color == NCCL_SPLIT_NOCOLOR) {
    // ncclCommInitChildComm (src/init.cc:2574); NCCL counts this split too (:2621).
    ++comm->nccl_split_count;
    debugLogOnDevice(comm->state->device(), kLogInfo, subsys::kInit, "ncclCommInitChildComm", 2574,
                     "Rank %d has color with NCCL_SPLIT_NOCOLOR, not creating a new communicator", comm->state->rank());
    *newcomm = nullptr;
    return ncclSuccess;
  }
  int newrank = 0;
  for (size_t i = 0; i < members->size(); ++i)
    if ((*members)[i] == comm->state->rank()) newrank = static_cast<int>(i);
  ncclUniqueId id =
      derivedUniqueId(comm->segment_name, fmt::format(".s{}c{}", generation, color));
  // A child inherits its parent's blocking mode unless its own config says otherwise.
  const bool nonblocking = config ? !blockingConfig(config) : comm->state->nonblocking.load();
  return initRank(newcomm, static_cast<int>(members->size()), id, newrank, comm->state->device(), nonblocking,
                  commNameOf(config), {"ncclCommSplit", comm, ++comm->nccl_split_count, color, key});
}

// The ranks not excluded make the new communicator among themselves, in their old order;
// the excluded ones (often dead) take no part. With NCCL_SHRINK_ABORT the parent's
// operations in flight are stopped first.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  if (comm == nullptr || newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommShrink: comm or newcomm is NULL");
  if (!comm->state) return fail(ncclInvalidArgument, "Attempt to use communicator before the previous operation returned ncclSuccess");
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr))
    return fail(ncclInvalidArgument, "ncclCommShrink: invalid excludeRanksList");
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return fail(ncclInvalidArgument, fmt::format("ncclCommShrink: invalid shrinkFlags {}", shrinkFlags));
  if (ncclResult_t r = checkConfig(config, "ncclCommShrink"); r != ncclSuccess) return r;
  const Communicator& parent = *comm->state;
  std::vector<bool> excluded(parent.nranks(), false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    const int r = excludeRanksList[i];
    if (r < 0 || r >= parent.nranks()) return fail(ncclInvalidArgument, fmt::format("ncclCommShrink: rank {} is not in the communicator", r));
    excluded[r] = true;
  }
  if (excluded[parent.rank()]) return fail(ncclInvalidArgument, "ncclCommShrink: the calling rank is excluded");
  int newrank = 0, remaining = 0;
  for (int r = 0; r < parent.nranks(); ++r) {
    if (excluded[r]) continue;
    if (r == parent.rank()) newrank = remaining;
    ++remaining;
  }
  if (shrinkFlags == NCCL_SHRINK_ABORT) comm->state->abort();
  int generation = ++comm->split_count;
  ncclUniqueId id = derivedUniqueId(comm->segment_name, fmt::format(".k{}n{}", generation, remaining));
  const bool nonblocking = config ? !blockingConfig(config) : parent.nonblocking.load();
  // NCCL's shrink job: color 0, key the parent rank, no split count (src/init.cc:2655).
  return initRank(newcomm, remaining, id, newrank, parent.device(), nonblocking, commNameOf(config),
                  {"ncclCommShrink", comm, 0, 0, parent.rank()});
}

// Stops what is in flight and leaves the communicator only to destroy (NCCL 2.28 init.cc).
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (comm == nullptr) return ncclSuccess;
  if (revokeFlags != NCCL_REVOKE_DEFAULT) return fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT");
  if (comm->revoked) return fail(ncclInvalidArgument, "ncclCommRevoke: already revoked");
  if (comm->state) comm->state->abort();
  comm->revoked = true;
  return ncclSuccess;
}

void ncclResetDebugInit() { simnccl::resetDebugLog(); }  // deprecated in nccl.h; NCCL_DEBUG* is read again

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (ncclResult_t r = checkComm(comm, "ncclRedOpCreatePreMulSum"); r != ncclSuccess) return r;
  if (op == nullptr || scalar == nullptr) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL");
  if (dtypeSize(datatype) == 0) return fail(ncclInvalidArgument, fmt::format("ncclRedOpCreatePreMulSum: unsupported datatype {}", static_cast<int>(datatype)));
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence");
  PreMulSum p{datatype, residence};
  if (residence == ncclScalarDevice)
    p.device_scalar = scalar;
  else
    p.immediate = loadElement(scalar, datatype);
  *op = comm->redops.add(p);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  if (static_cast<int>(op) < ncclNumOps) return fail(ncclInvalidArgument, "ncclRedOpDestroy: a built-in operator cannot be destroyed");
  if (!comm->redops.remove(op)) return fail(ncclInvalidArgument, fmt::format("ncclRedOpDestroy: unknown operator {}", static_cast<int>(op)));
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (ncclResult_t r = checkComm(comm, "ncclCommFinalize"); r != ncclSuccess) return r;
  if (!comm->state->nonblocking.load()) return ncclSuccess;
  // Non-blocking: the flush of outstanding work happens on simnccl's thread.
  comm->state->pending.store(ncclInProgress);
  std::thread([state = comm->state] { state->pending.store(ncclSuccess, std::memory_order_release); }).detach();
  return ncclInProgress;
}

// NCCL's destroy waits for the communicator's operations still running to complete
// (ncclCommAbort is the way out of a hang); then its resources go.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  if (comm->init->load(std::memory_order_acquire) == ncclInProgress)
    return fail(ncclInvalidArgument, "Attempt to use communicator before the previous operation returned ncclSuccess");
  if (comm->state) {
    while (comm->state->pending.load(std::memory_order_acquire) == ncclInProgress && !comm->state->aborted())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!comm->state->aborted()) cudaStreamSynchronize(comm->state->kernelStream());
    comm->state->shutdown();
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommAbort: comm is NULL");
  if (comm->state) {
    comm->state->abort();
    comm->state->shutdown();
    simgpu::FaultLedger::report();  // the job ends here; its launcher may not let it exit
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  // An init or a non-blocking operation still in progress, or failed, comes first.
  if (ncclResult_t init = comm->init->load(std::memory_order_acquire); init != ncclSuccess) {
    *asyncError = init;
    return ncclSuccess;
  }
  if (!comm->state) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  ncclResult_t pending = comm->state->pending.load(std::memory_order_acquire);
  *asyncError = pending != ncclSuccess ? pending : comm->state->async_error.load();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (ncclResult_t r = checkQuery(comm, count, "CommCount", "count"); r != ncclSuccess) return r;
  *count = comm->state->nranks();
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (ncclResult_t r = checkQuery(comm, device, "CommCuDevice", "devid"); r != ncclSuccess) return r;
  *device = comm->state->device();
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (ncclResult_t r = checkQuery(comm, rank, "CommUserRank", "rank"); r != ncclSuccess) return r;
  *rank = comm->state->rank();
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return lastError(); }

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  return cudaMalloc(ptr, size) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

ncclResult_t ncclMemFree(void* ptr) { return cudaFree(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError; }

ncclResult_t ncclGroupStart() { return groupStart(); }
ncclResult_t ncclGroupEnd() { return groupEnd(); }
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) { return groupSimulateEnd(simInfo); }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueueOp("ncclAllReduce", OpKind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, 0, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueueOp("ncclAllGather", OpKind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, 0, comm,
                   stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueueOp("ncclReduceScatter", OpKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, 0, comm,
                   stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueueOp("ncclBroadcast", OpKind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, 0, comm,
                   stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueueOp("ncclReduce", OpKind::Reduce, sendbuff, recvbuff, count, datatype, op, root, 0, comm, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueueOp("ncclSend", OpKind::Send, sendbuff, nullptr, count, datatype, ncclSum, 0, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueueOp("ncclRecv", OpKind::Recv, nullptr, recvbuff, count, datatype, ncclSum, 0, peer, comm, stream);
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  const size_t bytes = count * dtypeSize(datatype);
  return asP2pGroup(comm, "ncclAlltoAll", [&](int nranks, int) {
    for (int p = 0; p < nranks; ++p) {
      const char* out = static_cast<const char*>(sendbuff) + p * bytes;
      char* in = static_cast<char*>(recvbuff) + p * bytes;
      if (ncclResult_t r = appendTask("ncclAlltoAll", OpKind::Send, out, nullptr, count, datatype, ncclSum, 0, p, comm, stream); r != ncclSuccess) return r;
      if (ncclResult_t r = appendTask("ncclAlltoAll", OpKind::Recv, nullptr, in, count, datatype, ncclSum, 0, p, comm, stream); r != ncclSuccess) return r;
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * dtypeSize(datatype);
  return asP2pGroup(comm, "ncclGather", [&](int nranks, int rank) {
    if (root < 0 || root >= nranks) return fail(ncclInvalidArgument, fmt::format("ncclGather: invalid root {}", root));
    if (ncclResult_t r = appendTask("ncclGather", OpKind::Send, sendbuff, nullptr, count, datatype, ncclSum, 0, root, comm, stream); r != ncclSuccess) return r;
    if (rank != root) return ncclSuccess;
    for (int p = 0; p < nranks; ++p) {
      char* in = static_cast<char*>(recvbuff) + p * bytes;
      if (ncclResult_t r = appendTask("ncclGather", OpKind::Recv, nullptr, in, count, datatype, ncclSum, 0, p, comm, stream); r != ncclSuccess) return r;
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * dtypeSize(datatype);
  return asP2pGroup(comm, "ncclScatter", [&](int nranks, int rank) {
    if (root < 0 || root >= nranks) return fail(ncclInvalidArgument, fmt::format("ncclScatter: invalid root {}", root));
    if (rank == root) {
      for (int p = 0; p < nranks; ++p) {
        const char* out = static_cast<const char*>(sendbuff) + p * bytes;
        if (ncclResult_t r = appendTask("ncclScatter", OpKind::Send, out, nullptr, count, datatype, ncclSum, 0, p, comm, stream); r != ncclSuccess) return r;
      }
    }
    return appendTask("ncclScatter", OpKind::Recv, nullptr, recvbuff, count, datatype, ncclSum, 0, root, comm, stream);
  });
}

}  // extern "C"
