// The NCCL API of simnccl: argument checks with NCCL's error codes, then
// communicators (communicator.cc) and launches (group.cc).
#include <nccl.h>

#include <memory>
#include <mutex>
#include <string>

#include "communicator.h"
#include "group.h"
#include "reduction.h"
#include "simgpu/runtime.h"
#include "unique_id.h"

struct ncclComm {
  std::shared_ptr<simnccl::Communicator> state;  // null until a deferred (grouped) init completed
  std::string segment_name;
  int split_count = 0;
};

namespace simnccl {
namespace {

ncclResult_t fail(ncclResult_t code, const std::string& message) {
  setLastError(message);
  return code;
}

ncclResult_t joinInto(ncclComm* handle, ncclUniqueId id, int nranks, int rank, int device) {
  auto joined = Communicator::join(id, nranks, rank, device);
  if (!joined) return fail(ncclInvalidArgument, "ncclCommInitRank: " + joined.error());
  handle->state = std::move(*joined);
  handle->segment_name = *segmentNameFromId(id);
  return ncclSuccess;
}

ncclResult_t initRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, int device) {
  if (out == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm argument is NULL");
  if (nranks < 1) return fail(ncclInvalidArgument, "ncclCommInitRank: invalid nranks " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " not in [0, " +
                                         std::to_string(nranks) + ")");
  if (auto name = segmentNameFromId(id); !name) return fail(ncclInvalidArgument, "ncclCommInitRank: " + name.error());
  auto* handle = new ncclComm();
  *out = handle;
  if (inGroup()) {
    deferInit([=] { return joinInto(handle, id, nranks, rank, device); });
    return ncclSuccess;
  }
  ncclResult_t r = joinInto(handle, id, nranks, rank, device);
  if (r != ncclSuccess) {
    delete handle;
    *out = nullptr;
  }
  return r;
}

// ncclCommCount/CuDevice/UserRank as NCCL 2.28 checks them (init.cc: CommCheck, PtrCheck,
// ncclCommEnsureReady): a communicator still initializing (created in a group that has
// not ended) is a WARN and ncclInvalidArgument.
ncclResult_t checkQuery(const ncclComm* comm, const void* out, const char* fn, const char* out_name) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(fn) + " : comm argument is NULL");
  if (out == nullptr) return fail(ncclInvalidArgument, std::string(fn) + " : " + out_name + " argument is NULL");
  if (!comm->state) return fail(ncclInvalidArgument, "Attempt to use communicator before the previous operation returned ncclSuccess");
  return ncclSuccess;
}

ncclResult_t checkComm(const ncclComm* comm, const char* fn) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(fn) + ": comm is NULL");
  if (!comm->state) return fail(ncclInvalidUsage, std::string(fn) + ": communicator is not initialized");
  if (comm->state->aborted()) return fail(ncclInvalidUsage, std::string(fn) + ": communicator was aborted");
  return ncclSuccess;
}

ncclResult_t enqueueOp(const char* fn, OpKind kind, const void* sendbuff, void* recvbuff, size_t count,
                       ncclDataType_t dtype, ncclRedOp_t redop, int root, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  if (ncclResult_t r = checkComm(comm, fn); r != ncclSuccess) return r;
  const Communicator& c = *comm->state;
  if (dtypeSize(dtype) == 0) return fail(ncclInvalidArgument, std::string(fn) + ": unsupported datatype " + std::to_string(dtype));
  if (isCollective(kind) && kind != OpKind::AllGather && kind != OpKind::Broadcast && !supportedRedOp(redop))
    return fail(ncclInvalidArgument, std::string(fn) + ": unsupported reduction op " + std::to_string(redop));
  bool needs_send = kind != OpKind::Recv && !(kind == OpKind::Broadcast && c.rank() != root);
  bool needs_recv = kind != OpKind::Send && !(kind == OpKind::Reduce && c.rank() != root);
  if (count > 0 && ((needs_send && sendbuff == nullptr) || (needs_recv && recvbuff == nullptr)))
    return fail(ncclInvalidArgument, std::string(fn) + ": buffer is NULL");
  if ((kind == OpKind::Broadcast || kind == OpKind::Reduce) && (root < 0 || root >= c.nranks()))
    return fail(ncclInvalidArgument, std::string(fn) + ": invalid root " + std::to_string(root));
  if (!isCollective(kind) && (peer < 0 || peer >= c.nranks()))
    return fail(ncclInvalidArgument, std::string(fn) + ": invalid peer " + std::to_string(peer));
  Op op{kind, sendbuff, recvbuff, count, dtype, redop, root, peer, 0, stream, comm->state};
  if (isCollective(kind)) op.seq = comm->state->nextCollectiveSeq();
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

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t*) {
  return initRank(comm, nranks, id, rank, simgpu::currentDevice());
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
  if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: invalid ndev " + std::to_string(ndev));
  ncclUniqueId id = makeUniqueId();
  groupStart();
  for (int i = 0; i < ndev; ++i) {
    int device = devlist ? devlist[i] : i;
    if (ncclResult_t r = initRank(&comms[i], ndev, id, i, device); r != ncclSuccess) {
      groupEnd();
      return r;
    }
  }
  return groupEnd();
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  if (ncclResult_t r = checkComm(comm, "ncclCommSplit"); r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  auto members = comm->state->exchangeSplit(color, key);
  if (!members) return fail(ncclSystemError, "ncclCommSplit: " + members.error());
  int generation = ++comm->split_count;
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  int newrank = 0;
  for (size_t i = 0; i < members->size(); ++i)
    if ((*members)[i] == comm->state->rank()) newrank = static_cast<int>(i);
  ncclUniqueId id =
      derivedUniqueId(comm->segment_name, ".s" + std::to_string(generation) + "c" + std::to_string(color));
  return initRank(newcomm, static_cast<int>(members->size()), id, newrank, comm->state->device());
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return checkComm(comm, "ncclCommFinalize"); }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  if (comm->state) comm->state->shutdown();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommAbort: comm is NULL");
  if (comm->state) {
    comm->state->abort();
    comm->state->shutdown();
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  *asyncError = comm->state ? comm->state->async_error.load() : ncclInProgress;
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

}  // extern "C"
