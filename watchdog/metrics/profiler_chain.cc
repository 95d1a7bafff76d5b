#include "hangwatch/watchdog/metrics/profiler_chain.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include <fmt/format.h>

#include "hangwatch/watchdog/metrics/link_profiler.h"

namespace hangwatch::watchdog {
namespace {

namespace np = nccl_profiler;

const np::ProfilerV5& ours() { return linkProfiler(); }

pid_t ownPid() {
  static pid_t pid = [] {
    pthread_atfork(nullptr, nullptr, [] { pid = ::getpid(); });
    return ::getpid();
  }();
  return pid;
}

void* openJobPlugin(const std::string& name) {
  return dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
}

// NCCL's rules (src/plugin/plugin_open.cc): no name is libnccl-profiler.so; a name is
// tried as given, then a bare one (no '/', not lib*.so) as libnccl-profiler-<name>.so.
void* loadJobPluginLibrary(const std::string& name) {
  if (name.empty()) return openJobPlugin("libnccl-profiler.so");
  if (void* lib = openJobPlugin(name)) return lib;
  const bool bare = name.find('/') == std::string::npos &&
                    !(name.rfind("lib", 0) == 0 && name.size() >= 3 && name.compare(name.size() - 3, 3, ".so") == 0);
  return bare ? openJobPlugin("libnccl-profiler-" + name + ".so") : nullptr;
}

// The job's plugin, loaded once at the first init; nullptr when there is none usable.
const np::ProfilerV5* jobPlugin() {
  static const np::ProfilerV5* plugin = []() -> const np::ProfilerV5* {
    const char* choice = std::getenv(kJobProfilerPluginVar);
    if (choice == nullptr) return nullptr;  // the library did not offer itself in place of one
    void* lib = loadJobPluginLibrary(choice);
    if (lib == nullptr) {
      dlerror();
      return nullptr;
    }
    auto* table = static_cast<const np::ProfilerV5*>(dlsym(lib, np::kSymbolV5));
    Dl_info mine{}, theirs{};
    if (table != nullptr && dladdr(reinterpret_cast<const void*>(&ours), &mine) != 0 &&
        dladdr(table, &theirs) != 0 && mine.dli_fbase == theirs.dli_fbase)
      return nullptr;  // it names hangwatch itself
    if (table == nullptr || table->init == nullptr) {
      fmt::print(stderr,
                 "hangwatch: the job's NCCL profiler plugin {} has no {} interface; it is not loaded "
                 "(HANGWATCH_LINK_PROFILER=0 leaves it to NCCL)\n",
                 *choice ? choice : "libnccl-profiler.so", np::kSymbolV5);
      return nullptr;
    }
    return table;
  }();
  return plugin;
}

struct ChainContext {
  void* ours = nullptr;
  void* job = nullptr;
  int job_mask = 0;         // what the job's plugin asked for (it may change it later)
  int* nccl_mask = nullptr; // NCCL's mask, which must keep the bits of both
  int our_mask = 0;
};

// One event as NCCL sees it when both plugins are loaded.
struct ChainHandle {
  void* ours = nullptr;
  void* job = nullptr;
  bool remote = false;  // belongs to another process's operation (PXN)
};

std::atomic<const np::ProfilerV5*> g_job{nullptr};

// Keeps errno as NCCL's caller left it across a callback: loading the job's plugin
// (or failing to find NCCL's default one) must not show through in the user's errno.
class KeepErrno {
 public:
  KeepErrno() : saved_(errno) {}
  ~KeepErrno() { errno = saved_; }

 private:
  int saved_;
};

ncclResult_t init(void** context, uint64_t comm_id, int* mask, const char* name, int nodes, int nranks, int rank,
                  np::DebugLogger log) {
  KeepErrno keep;
  const np::ProfilerV5* job = jobPlugin();
  g_job.store(job, std::memory_order_release);
  if (job == nullptr) return ours().init(context, comm_id, mask, name, nodes, nranks, rank, log);
  auto* ctx = new (std::nothrow) ChainContext;
  if (ctx == nullptr) {  // no profiling for this communicator, rather than a mix-up of contexts
    *context = nullptr;
    *mask = 0;
    return ncclSuccess;
  }
  ours().init(&ctx->ours, comm_id, &ctx->our_mask, name, nodes, nranks, rank, log);
  ctx->job_mask = *mask;
  ncclResult_t rc = job->init(&ctx->job, comm_id, &ctx->job_mask, name, nodes, nranks, rank, log);
  if (rc != ncclSuccess) {
    // The job's plugin refused this communicator: NCCL would have run without it.
    ctx->job = nullptr;
    ctx->job_mask = 0;
  }
  ctx->nccl_mask = mask;
  *mask = ctx->our_mask | ctx->job_mask;
  *context = ctx;
  return ncclSuccess;
}

ncclResult_t startEvent(void* context, void** handle, np::EventDescr* descr) {
  const np::ProfilerV5* job = g_job.load(std::memory_order_acquire);
  if (job == nullptr) return ours().startEvent(context, handle, descr);
  *handle = nullptr;
  if (descr == nullptr) return ncclSuccess;
  // A parent is a handle of this process, unless the event is another process's proxy
  // operation; the context is that process's for the operation and everything under it.
  const bool remote_op = descr->type == np::kProxyOp && descr->proxyOp.pid != ownPid();
  const auto* parent = remote_op ? nullptr : static_cast<const ChainHandle*>(descr->parentObj);
  const bool remote = remote_op || (parent != nullptr && parent->remote);
  auto* ctx = remote ? nullptr : static_cast<ChainContext*>(context);
  if (ctx == nullptr && !remote) return ncclSuccess;
  auto* h = new (std::nothrow) ChainHandle;
  if (h == nullptr) return ncclSuccess;
  h->remote = remote;
  np::EventDescr d = *descr;
  if (ctx != nullptr && ctx->ours != nullptr) {
    d.parentObj = parent != nullptr ? parent->ours : nullptr;
    ours().startEvent(ctx->ours, &h->ours, &d);
  }
  const int job_mask = ctx != nullptr ? __atomic_load_n(&ctx->job_mask, __ATOMIC_RELAXED) : ~0;
  if ((remote || ctx->job != nullptr) && (descr->type & static_cast<uint64_t>(job_mask)) != 0) {
    d.parentObj = remote_op ? descr->parentObj : (parent != nullptr ? parent->job : nullptr);
    job->startEvent(remote ? nullptr : ctx->job, &h->job, &d);
  }
  // The job's plugin may change what it asks for at any time; NCCL keeps asking for ours too.
  if (ctx != nullptr && __atomic_load_n(ctx->nccl_mask, __ATOMIC_RELAXED) != (ctx->our_mask | job_mask))
    __atomic_store_n(ctx->nccl_mask, ctx->our_mask | job_mask, __ATOMIC_RELAXED);
  if (h->ours == nullptr && h->job == nullptr) {
    delete h;
    return ncclSuccess;
  }
  *handle = h;
  return ncclSuccess;
}

ncclResult_t recordEventState(void* handle, np::EventState state, np::EventStateArgs* args) {
  const np::ProfilerV5* job = g_job.load(std::memory_order_acquire);
  if (job == nullptr) return ours().recordEventState(handle, state, args);
  auto* h = static_cast<ChainHandle*>(handle);
  if (h == nullptr) return ncclSuccess;
  if (h->ours != nullptr) ours().recordEventState(h->ours, state, args);
  if (h->job != nullptr) job->recordEventState(h->job, state, args);
  return ncclSuccess;
}

ncclResult_t stopEvent(void* handle) {
  const np::ProfilerV5* job = g_job.load(std::memory_order_acquire);
  if (job == nullptr) return ours().stopEvent(handle);
  auto* h = static_cast<ChainHandle*>(handle);
  if (h == nullptr) return ncclSuccess;
  if (h->ours != nullptr) ours().stopEvent(h->ours);
  if (h->job != nullptr) job->stopEvent(h->job);
  delete h;
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  const np::ProfilerV5* job = g_job.load(std::memory_order_acquire);
  if (job == nullptr) return ours().finalize(context);
  auto* ctx = static_cast<ChainContext*>(context);
  if (ctx == nullptr) return ncclSuccess;
  ncclResult_t rc = ctx->job != nullptr ? job->finalize(ctx->job) : ncclSuccess;
  if (ctx->ours != nullptr) ours().finalize(ctx->ours);
  delete ctx;
  return rc;
}

const np::ProfilerV5 kChained = {"hangwatch", &init, &startEvent, &stopEvent, &recordEventState, &finalize};

}  // namespace

const nccl_profiler::ProfilerV5& chainedProfiler() { return kChained; }

}  // namespace hangwatch::watchdog
