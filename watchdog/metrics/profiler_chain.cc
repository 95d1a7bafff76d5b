#include "hangwatch/watchdog/metrics/profiler_chain.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <new>

#include <fmt/format.h>

#include "hangwatch/common/nccl_profiler_plugin.h"
#include "hangwatch/watchdog/metrics/link_profiler.h"

namespace hangwatch::watchdog {
namespace {

namespace np = nccl_profiler;

// This process's pid, kept current across fork (getpid() is a system call per event otherwise).
pid_t ownPid() {
  static pid_t pid = [] {
    pthread_atfork(nullptr, nullptr, [] { pid = ::getpid(); });
    return ::getpid();
  }();
  return pid;
}

// Keeps errno as NCCL's caller left it across a callback: loading the job's plugin
// (or failing to find NCCL's default one) must not show through in the user's errno.
class KeepErrno {
 public:
  KeepErrno() : saved_(errno) {}
  ~KeepErrno() { errno = saved_; }

 private:
  int saved_;
};

bool isHangwatchsOwn(const void* symbol) {
  Dl_info mine{}, theirs{};
  return dladdr(reinterpret_cast<const void*>(&ownPid), &mine) != 0 && dladdr(symbol, &theirs) != 0 &&
         mine.dli_fbase == theirs.dli_fbase;
}

}  // namespace

JobPlugin loadJobPlugin() {
  const char* choice = std::getenv(kJobProfilerPluginVar);
  if (choice == nullptr) return {};
  const EnvLookup env = [](const char* name) { return std::getenv(name); };
  // NCCL has loaded its NET plugin by the time it loads a profiler: take only that one.
  np::PluginLibrary lib = np::openProfilerLibrary(choice, env, RTLD_NOLOAD);
  if (!lib) return {};
  bool names_hangwatch = false;
  np::ProfilerInterface iface = np::profilerInterface([&](const char* symbol) -> void* {
    void* p = dlsym(lib.handle, symbol);
    if (p == nullptr || !isHangwatchsOwn(p)) return p;
    names_hangwatch = true;
    // The program's scope finds hangwatch first (it is preloaded); NCCL alone would have
    // found the next definition.
    return lib.opened.empty() ? dlsym(RTLD_NEXT, symbol) : nullptr;
  });
  if (iface.table == nullptr) {
    if (!names_hangwatch)
      fmt::print(stderr,
                 "hangwatch: the job's NCCL profiler plugin {} has neither an {} nor an {} interface; it is not "
                 "loaded (HANGWATCH_LINK_PROFILER=0 leaves it to NCCL)\n",
                 lib.opened.empty() ? "STATIC_PLUGIN" : lib.opened, np::kSymbolV5, np::kSymbolV4);
    dlclose(lib.handle);
    return {};
  }
  return {iface.table, lib.handle};
}

ProfilerChain::ProfilerChain(const np::ProfilerV5& ours, JobPluginLoader load, size_t paired_capacity)
    : ours_(ours), load_(std::move(load)), paired_(paired_capacity) {}

// ncclProfilerPluginLoad's reference counting, under load_mutex_.
const np::ProfilerV5* ProfilerChain::acquireJob() {
  if (refs_++ == 0 && !load_failed_) {
    job_plugin_ = load_();
    load_failed_ = job_plugin_.table == nullptr;
    job_.store(job_plugin_.table, std::memory_order_release);
  }
  return job_.load(std::memory_order_relaxed);
}

void ProfilerChain::releaseJob() {
  if (--refs_ > 0) return;
  job_.store(nullptr, std::memory_order_release);
  if (job_plugin_.library != nullptr) dlclose(job_plugin_.library);
  job_plugin_ = {};
}

ncclResult_t ProfilerChain::init(void** context, uint64_t comm_id, int* mask, const char* name, int nodes,
                                 int nranks, int rank, np::DebugLogger log) {
  KeepErrno keep;
  std::lock_guard<std::mutex> lock(load_mutex_);
  const np::ProfilerV5* job = acquireJob();
  if (job == nullptr) return ours_.init(context, comm_id, mask, name, nodes, nranks, rank, log);
  auto* ctx = new (std::nothrow) ChainContext;
  if (ctx == nullptr) {  // no profiling for this communicator, rather than a mix-up of contexts
    releaseJob();
    *context = nullptr;
    return ncclSuccess;
  }
  int our_mask = 0;
  ours_.init(&ctx->ours, comm_id, &our_mask, name, nodes, nranks, rank, log);
  ours_mask_.store(our_mask, std::memory_order_relaxed);
  // NCCL goes on with whatever context a failed init left (src/plugin/profiler.cc).
  if (job->init(&ctx->job, comm_id, &job_mask_, name, nodes, nranks, rank, log) != ncclSuccess)
    fmt::print(stderr, "hangwatch: the job's NCCL profiler plugin failed to initialise a communicator\n");
  nccl_mask_.store(mask, std::memory_order_relaxed);
  __atomic_store_n(mask, our_mask | __atomic_load_n(&job_mask_, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  *context = ctx;
  return ncclSuccess;
}

bool ProfilerChain::jobWants(uint64_t type) const {
  return (static_cast<uint64_t>(__atomic_load_n(&job_mask_, __ATOMIC_RELAXED)) & np::emittingMask(type)) != 0;
}

// The job's plugin may change its mask at any time; NCCL keeps asking for hangwatch's too.
void ProfilerChain::keepNcclMask() {
  int* nccl = nccl_mask_.load(std::memory_order_relaxed);
  if (nccl == nullptr) return;
  const int want = ours_mask_.load(std::memory_order_relaxed) | __atomic_load_n(&job_mask_, __ATOMIC_RELAXED);
  if (__atomic_load_n(nccl, __ATOMIC_RELAXED) != want) __atomic_store_n(nccl, want, __ATOMIC_RELAXED);
}

ncclResult_t ProfilerChain::startEvent(void* context, void** handle, np::EventDescr* descr) {
  if (job_.load(std::memory_order_acquire) == nullptr) return ours_.startEvent(context, handle, descr);
  if (descr == nullptr) return ncclSuccess;
  keepNcclMask();
  auto* ctx = static_cast<ChainContext*>(context);
  np::EventDescr d = *descr;
  switch (d.type) {
    case np::kProxyOp: {
      // Another process's operation (PXN) comes with that process's context: never touched.
      const bool remote = d.proxyOp.pid != ownPid();
      startPaired(remote ? nullptr : ctx, handle, d, remote);
      break;
    }
    case np::kKernelCh:
      startPaired(ctx, handle, d, false);
      break;
    case np::kProxyStep:
      startStep(ctx, handle, d);
      break;
    case np::kColl:
      // Hangwatch's side only notes the algorithm and keeps no handle: the event is the job's.
      if (ctx != nullptr && ctx->ours != nullptr) {
        void* ignored = nullptr;
        ours_.startEvent(ctx->ours, &ignored, &d);
      }
      startJobOnly(ctx, handle, d);
      break;
    default:
      startJobOnly(ctx, handle, d);
  }
  return ncclSuccess;
}

// NCCL alone would not call the plugin for an event its mask does not ask for: NCCL's
// handle is then left as it was.
void ProfilerChain::startJobOnly(ChainContext* ctx, void** handle, np::EventDescr& d) {
  if (!jobWants(d.type)) return;
  void* job_context = jobContext(ctx);
  PairedEvent* step_of = nullptr;
  if (PairedStep* step = paired_.asStep(d.parentObj, &step_of)) {  // a NetPlugin event's step
    d.parentObj = step->job;
    if (step_of->remote) job_context = nullptr;
  } else if (PairedEvent* parent = paired_.asEvent(d.parentObj)) {
    d.parentObj = parent->job;
    if (parent->remote) job_context = nullptr;
  }
  job_.load(std::memory_order_relaxed)->startEvent(job_context, handle, &d);
}

void ProfilerChain::startPaired(ChainContext* ctx, void** handle, np::EventDescr& d, bool remote) {
  const np::ProfilerV5* job = job_.load(std::memory_order_relaxed);
  const bool job_wants = jobWants(d.type);
  const bool ours_wants = ctx != nullptr && ctx->ours != nullptr;
  if (!job_wants && !ours_wants) {
    *handle = nullptr;
    return;
  }
  PairedEvent* e = paired_.claim(ctx, remote);
  if (e == nullptr) {
    // Full: the job's plugin gets its event alone; never another process's, whose steps
    // could not be told from this process's.
    if (job_wants && !remote)
      job->startEvent(jobContext(ctx), handle, &d);
    else
      *handle = nullptr;
    return;
  }
  void* parent = d.parentObj;  // the job's own Coll/P2p handle, or another process's
  if (ours_wants) {
    d.parentObj = nullptr;  // hangwatch's profiler does not use it
    ours_.startEvent(ctx->ours, &e->ours, &d);
  }
  if (job_wants) {
    d.parentObj = parent;
    job->startEvent(remote ? nullptr : ctx->job, &e->job, &d);
  }
  // Kept while the job's plugin asked for it, even with a null handle: its steps still come.
  if (e->ours == nullptr && !job_wants) {
    paired_.release(e);
    *handle = nullptr;
    return;
  }
  *handle = e;
}

void ProfilerChain::startStep(ChainContext* ctx, void** handle, np::EventDescr& d) {
  const np::ProfilerV5* job = job_.load(std::memory_order_relaxed);
  PairedEvent* op = paired_.asEvent(d.parentObj);
  if (op == nullptr) {
    // Its operation went to the job's plugin alone (the records were full) or to neither.
    if (d.parentObj != nullptr && jobWants(d.type))
      job->startEvent(jobContext(ctx), handle, &d);
    else
      *handle = nullptr;
    return;
  }
  ChainContext* owner = op->owner.load(std::memory_order_relaxed);
  PairedStep& slot = op->steps[static_cast<unsigned>(d.proxyStep.step) % kPairedStepSlots];
  slot.ours = nullptr;
  if (op->ours != nullptr) {
    d.parentObj = op->ours;
    ours_.startEvent(owner->ours, &slot.ours, &d);
  }
  slot.job = nullptr;
  if (jobWants(d.type)) {
    d.parentObj = op->job;
    job->startEvent(op->remote ? nullptr : jobContext(owner), &slot.job, &d);
  }
  *handle = slot.ours != nullptr || slot.job != nullptr ? &slot : nullptr;
}

ncclResult_t ProfilerChain::stopEvent(void* handle) {
  const np::ProfilerV5* job = job_.load(std::memory_order_acquire);
  if (job == nullptr) return ours_.stopEvent(handle);
  if (handle == nullptr) return ncclSuccess;
  PairedEvent* op = nullptr;
  if (PairedEvent* e = paired_.asEvent(handle)) {
    if (e->ours != nullptr) ours_.stopEvent(e->ours);
    if (e->job != nullptr) job->stopEvent(e->job);
    paired_.release(e);
  } else if (PairedStep* step = paired_.asStep(handle, &op)) {
    if (step->ours != nullptr) ours_.stopEvent(step->ours);
    if (step->job != nullptr) job->stopEvent(step->job);
    *step = PairedStep{};
  } else {
    job->stopEvent(handle);
  }
  return ncclSuccess;
}

ncclResult_t ProfilerChain::recordEventState(void* handle, np::EventState state, np::EventStateArgs* args) {
  const np::ProfilerV5* job = job_.load(std::memory_order_acquire);
  if (job == nullptr) return ours_.recordEventState(handle, state, args);
  if (handle == nullptr) return ncclSuccess;
  PairedEvent* op = nullptr;
  if (PairedEvent* e = paired_.asEvent(handle)) {
    if (e->ours != nullptr) ours_.recordEventState(e->ours, state, args);
    if (e->job != nullptr) job->recordEventState(e->job, state, args);
  } else if (PairedStep* step = paired_.asStep(handle, &op)) {
    if (step->ours != nullptr) ours_.recordEventState(step->ours, state, args);
    // NCCL records a step's states only under an operation the plugin holds a handle of.
    if (step->job != nullptr && op->job != nullptr) job->recordEventState(step->job, state, args);
  } else {
    job->recordEventState(handle, state, args);
  }
  return ncclSuccess;
}

ncclResult_t ProfilerChain::finalize(void* context) {
  KeepErrno keep;
  std::lock_guard<std::mutex> lock(load_mutex_);
  const np::ProfilerV5* job = job_.load(std::memory_order_relaxed);
  ncclResult_t rc = ncclSuccess;
  if (job == nullptr) {
    rc = ours_.finalize(context);
  } else if (auto* ctx = static_cast<ChainContext*>(context); ctx != nullptr) {
    // ncclProfilerPluginFinalize: a plugin is finalized only with a context it handed out.
    if (ctx->job != nullptr) rc = job->finalize(ctx->job);
    ours_.finalize(ctx->ours);
    paired_.releaseAllOf(ctx);
    delete ctx;
  }
  releaseJob();
  return rc;
}

namespace {

ProfilerChain& processChain() {
  static ProfilerChain* chain = new ProfilerChain(linkProfiler(), &loadJobPlugin);  // lives as long as the process
  return *chain;
}

ncclResult_t chainInit(void** context, uint64_t comm_id, int* mask, const char* name, int nodes, int nranks, int rank,
                       np::DebugLogger log) {
  return processChain().init(context, comm_id, mask, name, nodes, nranks, rank, log);
}
ncclResult_t chainStart(void* context, void** handle, np::EventDescr* descr) {
  return processChain().startEvent(context, handle, descr);
}
ncclResult_t chainStop(void* handle) { return processChain().stopEvent(handle); }
ncclResult_t chainRecord(void* handle, np::EventState state, np::EventStateArgs* args) {
  return processChain().recordEventState(handle, state, args);
}
ncclResult_t chainFinalize(void* context) { return processChain().finalize(context); }

const np::ProfilerV5 kChained = {"hangwatch", &chainInit, &chainStart, &chainStop, &chainRecord, &chainFinalize};

}  // namespace

const nccl_profiler::ProfilerV5& chainedProfiler() { return kChained; }

}  // namespace hangwatch::watchdog
