#pragma once
// The profiler plugin libhangwatch.so exports: hangwatch's own link profiler
// (link_profiler.h) in front of the profiler plugin the job itself chose, so that a job
// keeps its profiler and hangwatch still sees network proxy steps. The job's plugin is
// given exactly what NCCL 2.28 would have given it loaded alone:
//  - the same library and interface: its choice (NCCL_PROFILER_PLUGIN from the
//    environment or NCCL's conf files, else NCCL's default) comes in
//    HANGWATCH_JOB_PROFILER_PLUGIN (profiler_plugin_choice.h) and is opened by NCCL's
//    rules (common/nccl_profiler_plugin.h: name rules, a static plugin, the NET plugin's
//    library, ncclProfiler_v5 else v4), at the first init, and closed after the last
//    finalize, as NCCL opens and closes it;
//  - its own activation mask: one int for the whole process, never freed (NCCL's
//    ncclProfilerEventMask), which every one of its inits gets; NCCL is asked for both
//    plugins' bits, and a change the job's plugin makes shows at NCCL's next call;
//  - the events NCCL sends for its mask, implied parents included (emittingMask), and
//    no others;
//  - its own handles, and as parents the handles it returned itself: events only it
//    takes (GroupApi, CollApi, P2pApi, KernelLaunch, Group, Coll, P2p, ProxyCtrl,
//    NetPlugin) go to NCCL with the job's handle itself, so NCCL keeps it (a Coll's
//    CollApi parent was stopped long before); events both take (ProxyOp, ProxyStep,
//    KernelCh) get a record of both handles (paired_events.h), bounded whatever NCCL
//    does: a step started again without a stop reuses its slot.
// Under PXN an operation of another local process arrives with that process's context
// and parent: the job's plugin gets the parent as NCCL gave it (it checks the pid, as
// NCCL's README asks) and a null context, hangwatch's nothing. Without a job plugin the
// callbacks go straight to hangwatch's, with no wrapping.
#include <atomic>
#include <functional>
#include <mutex>

#include "hangwatch/common/nccl_profiler_v5.h"
#include "hangwatch/watchdog/metrics/paired_events.h"

namespace hangwatch::watchdog {

// The environment variable that carries the job's own plugin choice to the chain.
inline constexpr const char* kJobProfilerPluginVar = "HANGWATCH_JOB_PROFILER_PLUGIN";

// The job's plugin as opened: its calls (v5, or NCCL's v4 adaptor) and its library.
struct JobPlugin {
  const nccl_profiler::ProfilerV5* table = nullptr;  // null: the job has none
  void* library = nullptr;                           // dlclose'd after the last finalize
};
using JobPluginLoader = std::function<JobPlugin()>;

// From HANGWATCH_JOB_PROFILER_PLUGIN (unset: the library did not offer itself in place
// of one); a choice that resolves to libhangwatch.so itself is no job plugin.
JobPlugin loadJobPlugin();

// One communicator's pair of contexts.
struct ChainContext {
  void* ours = nullptr;
  void* job = nullptr;
};

class ProfilerChain {
 public:
  // `paired_capacity`: the most ProxyOp/KernelCh events in flight at once that both
  // plugins see (past it the job's plugin gets them alone).
  ProfilerChain(const nccl_profiler::ProfilerV5& ours, JobPluginLoader load, size_t paired_capacity = 1 << 16);
  ProfilerChain(const ProfilerChain&) = delete;
  ProfilerChain& operator=(const ProfilerChain&) = delete;

  ncclResult_t init(void** context, uint64_t comm_id, int* mask, const char* name, int nodes, int nranks, int rank,
                    nccl_profiler::DebugLogger log);
  ncclResult_t startEvent(void* context, void** handle, nccl_profiler::EventDescr* descr);
  ncclResult_t stopEvent(void* handle);
  ncclResult_t recordEventState(void* handle, nccl_profiler::EventState state, nccl_profiler::EventStateArgs* args);
  ncclResult_t finalize(void* context);

  // Records of events both plugins hold now (tests, bench).
  size_t pairedInUse() const { return paired_.inUse(); }

 private:
  bool jobWants(uint64_t type) const;
  void keepNcclMask();
  void startPaired(ChainContext* ctx, void** handle, nccl_profiler::EventDescr& d, bool remote);
  void startStep(ChainContext* ctx, void** handle, nccl_profiler::EventDescr& d);
  void startJobOnly(ChainContext* ctx, void** handle, nccl_profiler::EventDescr& d);
  void* jobContext(const ChainContext* ctx) const { return ctx != nullptr ? ctx->job : nullptr; }
  const nccl_profiler::ProfilerV5* acquireJob();
  void releaseJob();

  const nccl_profiler::ProfilerV5& ours_;
  const JobPluginLoader load_;
  std::mutex load_mutex_;  // init and finalize: NCCL's profilerMutex
  int refs_ = 0;
  bool load_failed_ = false;  // NCCL does not try again in this process
  JobPlugin job_plugin_;
  std::atomic<const nccl_profiler::ProfilerV5*> job_{nullptr};
  int job_mask_ = 0;                 // the job plugin's mask: outlives anything it may hold
  std::atomic<int> ours_mask_{0};
  std::atomic<int*> nccl_mask_{nullptr};
  PairedEventPool paired_;
};

// The process's chain, whose callbacks libhangwatch.so exports as `ncclProfiler_v5`.
const nccl_profiler::ProfilerV5& chainedProfiler();

}  // namespace hangwatch::watchdog
