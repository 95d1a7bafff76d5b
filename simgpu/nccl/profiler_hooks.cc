#include "hangwatch/simgpu/nccl/profiler_hooks.h"

#include <dlfcn.h>
#include <strings.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "hangwatch/common/nccl_conf.h"
#include "hangwatch/common/nccl_profiler_plugin.h"
#include "hangwatch/simgpu/nccl/debug_log.h"

namespace simnccl {
namespace {

namespace np = hangwatch::nccl_profiler;

// NCCL's ncclProfilerEventMask: every communicator's init writes the same variable, and
// a plugin may keep the pointer and change what it asks for later.
int g_event_mask = 0;

// NCCL's plugin state (src/plugin/profiler.cc): loaded at the first init, reference
// counted per communicator, closed when the last one is finalized.
std::mutex g_load_mutex;
int g_refs = 0;
bool g_load_failed = false;  // NCCL does not try again in this process
void* g_library = nullptr;
std::atomic<const np::ProfilerV5*> g_plugin{nullptr};

const hangwatch::EnvLookup kEnv = [](const char* name) { return std::getenv(name); };

// NCCL's initEnv (src/misc/param.cc): the conf files fill variables still unset.
void applyConfFiles() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& file : hangwatch::ncclConfFiles(kEnv))
      for (const auto& [name, value] : hangwatch::ncclConfEntries(file)) setenv(name.c_str(), value.c_str(), 0);
  });
}

// ncclNetInit (src/plugin/net.cc) loads the NET plugin's library in commAlloc, before the
// profiler; simnccl's own network stands in for it, so it is loaded only to be where the
// profiler's fallback finds it, and never called.
void loadNetPluginLibrary() {
  static std::once_flag once;
  std::call_once(once, [] { (void)np::openNetPluginLibrary(kEnv, 0); });
}

// ncclDebugLog is the logger NCCL hands the plugin (src/plugin/profiler.cc): its lines go
// where NCCL's own go (debug_log.h).
void pluginLogger(int level, unsigned long flags, const char* file, int line, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  debugLogV(level, flags, file, line, format, ap);
  va_end(ap);
}

// ncclProfilerPluginLoad under g_load_mutex: null when profiling is off or nothing loads.
const np::ProfilerV5* loadPlugin() {
  if (g_refs > 0) {
    ++g_refs;
    return g_plugin.load(std::memory_order_relaxed);
  }
  if (g_load_failed) return nullptr;
  applyConfFiles();
  loadNetPluginLibrary();
  g_load_failed = true;
  const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
  if (name != nullptr && strcasecmp(name, "none") == 0) return nullptr;
  np::PluginLibrary lib = np::openProfilerLibrary(name, kEnv, 0);
  if (!lib) {
    if (name != nullptr && *name != '\0') std::fprintf(stderr, "simnccl: NCCL_PROFILER_PLUGIN %s could not be loaded\n", name);
    return nullptr;
  }
  np::ProfilerInterface iface = np::profilerInterface([&](const char* s) { return dlsym(lib.handle, s); });
  if (iface.table == nullptr) {
    std::fprintf(stderr, "simnccl: the profiler plugin %s is unsupported\n", lib.opened.c_str());
    dlclose(lib.handle);
    return nullptr;
  }
  g_load_failed = false;
  g_library = lib.handle;
  g_plugin.store(iface.table, std::memory_order_release);
  g_refs = 1;
  return iface.table;
}

// ncclProfilerPluginUnload.
void unloadPlugin() {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (--g_refs > 0) return;
  g_plugin.store(nullptr, std::memory_order_release);
  dlclose(g_library);
  g_library = nullptr;
}

}  // namespace

uint64_t communicatorId(const char* segment_name) {
  uint64_t h = 14695981039346656037ull;
  for (const char* p = segment_name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return h;
}

std::unique_ptr<ProfilerHooks> ProfilerHooks::attach(uint64_t comm_id, const char* comm_name, int nnodes,
                                                     int nranks, int rank) {
  // Communicators of one group are made on several threads; their inits write one mask.
  std::lock_guard<std::mutex> lock(g_load_mutex);
  const np::ProfilerV5* plugin = loadPlugin();
  if (plugin == nullptr) return nullptr;
  void* context = nullptr;
  if (plugin->init(&context, comm_id, &g_event_mask, comm_name, nnodes, nranks, rank, &pluginLogger) != ncclSuccess)
    std::fprintf(stderr, "simnccl: profiler init failed, continuing without profiler\n");
  return std::unique_ptr<ProfilerHooks>(new ProfilerHooks(plugin, context, rank));
}

// ncclProfilerPluginFinalize: finalize only a context the plugin handed out.
ProfilerHooks::~ProfilerHooks() {
  if (context_ != nullptr) plugin_->finalize(context_);
  unloadPlugin();
}

int ProfilerHooks::mask() { return __atomic_load_n(&g_event_mask, __ATOMIC_RELAXED); }

void* ProfilerHooks::start(np::EventDescr& descr) {
  void* handle = nullptr;
  start(descr, &handle);
  return handle;
}

void ProfilerHooks::start(np::EventDescr& descr, void** handle) { plugin_->startEvent(context_, handle, &descr); }

void ProfilerHooks::record(void* handle, np::EventState state, np::EventStateArgs* args) {
  const np::ProfilerV5* plugin = g_plugin.load(std::memory_order_acquire);
  if (handle != nullptr && plugin != nullptr) plugin->recordEventState(handle, state, args);
}

void ProfilerHooks::stop(void* handle) {
  const np::ProfilerV5* plugin = g_plugin.load(std::memory_order_acquire);
  if (handle != nullptr && plugin != nullptr) plugin->stopEvent(handle);
}

}  // namespace simnccl
