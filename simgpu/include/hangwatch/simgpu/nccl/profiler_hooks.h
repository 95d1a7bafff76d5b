#pragma once
// simnccl's side of NCCL's profiler plugin API (v5), as NCCL 2.28 drives it
// (src/plugin/profiler.cc): the library NCCL_PROFILER_PLUGIN (or NCCL's conf files)
// names is loaded once per process and initialised per communicator with its commId,
// name, nNodes, nranks and rank; the activation mask the plugin sets is one variable
// for the whole process, as NCCL's ncclProfilerEventMask is. What is reported when
// is decided by the callers: task_profile.h (Coll/P2p and KernelCh events) and
// net_proxy_op.h (ProxyOp/ProxyStep, only for connections between nodes: links inside
// a node are P2P/SHM and report no proxy events, as in NCCL).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "hangwatch/common/nccl_profiler_v5.h"

namespace simnccl {

class ProfilerHooks {
 public:
  // Null when no plugin is configured or its init failed.
  static std::unique_ptr<ProfilerHooks> attach(uint64_t comm_id, const char* comm_name, int nnodes, int nranks,
                                               int rank);
  ~ProfilerHooks();
  ProfilerHooks(const ProfilerHooks&) = delete;
  ProfilerHooks& operator=(const ProfilerHooks&) = delete;

  // What the plugin asks for now (it may change it at any time).
  int mask() const;
  int rank() const { return rank_; }

  // Thin calls into the plugin; a null handle is ignored, as NCCL ignores it.
  void* start(hangwatch::nccl_profiler::EventDescr& descr);
  void record(void* handle, hangwatch::nccl_profiler::EventState state,
              hangwatch::nccl_profiler::EventStateArgs* args);
  void stop(void* handle);

 private:
  ProfilerHooks(const hangwatch::nccl_profiler::ProfilerV5* plugin, void* context, int rank)
      : plugin_(plugin), context_(context), rank_(rank) {}

  const hangwatch::nccl_profiler::ProfilerV5* plugin_;
  void* context_;
  int rank_;
};

// FNV-1a of the communicator's shared-segment name: the same on every member.
uint64_t communicatorId(const char* segment_name);

}  // namespace simnccl
