#pragma once
// simnccl's side of NCCL's profiler plugin API, as NCCL 2.28 drives it
// (src/plugin/profiler.cc): the library and interface are found by NCCL's rules
// (common/nccl_profiler_plugin.h: NCCL_PROFILER_PLUGIN from the environment or NCCL's
// conf files, libnccl-profiler.so, the NET plugin's library; ncclProfiler_v5, else v4),
// loaded with the first communicator and closed again when the last one is finalized;
// each communicator's init gets its commId, name, nNodes, nranks, rank and a logger.
// The activation mask the plugin sets is one variable for the whole process, as NCCL's
// ncclProfilerEventMask is (it survives the plugin's unloading). A failed init is
// logged and the communicator goes on with whatever context the plugin left, as in NCCL.
// What is reported when is decided by the callers: api_profile.h (GroupApi, CollApi,
// P2pApi), group.cc (KernelLaunch, Group), task_profile.h (Coll/P2p, KernelCh) and
// net_proxy_op.h (ProxyOp/ProxyStep, only for connections between nodes).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "hangwatch/common/nccl_profiler_v5.h"

namespace simnccl {

class ProfilerHooks {
 public:
  // Null when no plugin is configured or loadable.
  static std::unique_ptr<ProfilerHooks> attach(uint64_t comm_id, const char* comm_name, int nnodes, int nranks,
                                               int rank);
  ~ProfilerHooks();
  ProfilerHooks(const ProfilerHooks&) = delete;
  ProfilerHooks& operator=(const ProfilerHooks&) = delete;

  // What the plugin asks for now (it may change it at any time).
  static int mask();
  int rank() const { return rank_; }

  // Thin calls into the plugin; a null handle is ignored, as NCCL ignores it. `start`
  // leaves `handle` as it was when the plugin does not write it (NCCL's v4 adaptor).
  void* start(hangwatch::nccl_profiler::EventDescr& descr);
  void start(hangwatch::nccl_profiler::EventDescr& descr, void** handle);
  static void record(void* handle, hangwatch::nccl_profiler::EventState state,
                     hangwatch::nccl_profiler::EventStateArgs* args);
  static void stop(void* handle);

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
