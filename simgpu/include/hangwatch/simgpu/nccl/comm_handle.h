#pragma once
// What an ncclComm_t points at in simnccl: the shared communicator state (null until a
// grouped init completed), and per-handle API bookkeeping (derivations, custom reduction
// operators, registered buffers and windows).
#include <nccl.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/custom_redop.h"

struct ncclWindow_vidmem {  // ncclWindow_t: a registered window (nccl.h only declares the type)
  void* base;
  size_t size;
  int flags;
};

struct ncclComm {
  std::shared_ptr<simnccl::Communicator> state;  // null until a deferred (grouped or non-blocking) init completed
  // A non-blocking init (config.blocking = 0): ncclInProgress until simnccl's own thread
  // has made `state` (written before this turns), then its result. Shared with that thread.
  std::shared_ptr<std::atomic<ncclResult_t>> init = std::make_shared<std::atomic<ncclResult_t>>(ncclSuccess);
  std::string segment_name;
  int split_count = 0;  // splits and shrinks made from this handle, for the children's ids
  int nccl_split_count = 0;  // NCCL's comm->splitCount: splits only, which a child's Init lines name
  bool revoked = false;
  simnccl::CustomRedOps redops;
  std::mutex registry_mutex;
  std::set<void*> registrations;
  std::set<ncclWindow_vidmem*> windows;
};

namespace simnccl {
// Whether [buff, buff + bytes) lies inside one buffer registered with ncclCommRegister
// on this handle (NCCL's registration cache lookup, ncclRegFind).
bool insideRegisteredBuffer(ncclComm& comm, const void* buff, size_t bytes);
}  // namespace simnccl
