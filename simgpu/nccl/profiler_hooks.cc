#include "hangwatch/simgpu/nccl/profiler_hooks.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "hangwatch/common/nccl_conf.h"

namespace simnccl {
namespace {

namespace np = hangwatch::nccl_profiler;

// NCCL's ncclProfilerEventMask: every communicator's init writes the same variable, and
// a plugin may keep the pointer and change what it asks for later.
int g_event_mask = 0;

// NCCL's initEnv (src/misc/param.cc): the conf files fill variables still unset.
void applyConfFiles() {
  const hangwatch::EnvLookup env = [](const char* name) { return std::getenv(name); };
  for (const std::string& file : hangwatch::ncclConfFiles(env))
    for (const auto& [name, value] : hangwatch::ncclConfEntries(file)) setenv(name.c_str(), value.c_str(), 0);
}

// NCCL's name rules (src/plugin/plugin_open.cc): no name is libnccl-profiler.so; a name
// is tried as given, then a bare one (no '/', not lib*.so) as libnccl-profiler-<name>.so.
void* openPluginLibrary(const std::string& name) {
  if (name.empty()) return dlopen("libnccl-profiler.so", RTLD_NOW | RTLD_LOCAL);
  if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  const bool bare = name.find('/') == std::string::npos &&
                    !(name.rfind("lib", 0) == 0 && name.size() >= 3 && name.compare(name.size() - 3, 3, ".so") == 0);
  return bare ? dlopen(("libnccl-profiler-" + name + ".so").c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
}

// Loaded once per process, as NCCL does; never unloaded.
const np::ProfilerV5* loadPlugin() {
  static const np::ProfilerV5* plugin = [] () -> const np::ProfilerV5* {
    applyConfFiles();
    const char* chosen = std::getenv("NCCL_PROFILER_PLUGIN");
    const std::string name = chosen != nullptr ? chosen : "";
    if (strcasecmp(name.c_str(), "none") == 0) return nullptr;
    void* lib = openPluginLibrary(name);
    if (lib == nullptr) {
      if (!name.empty()) std::fprintf(stderr, "simnccl: NCCL_PROFILER_PLUGIN %s: %s\n", name.c_str(), dlerror());
      dlerror();
      return nullptr;
    }
    return static_cast<const np::ProfilerV5*>(dlsym(lib, np::kSymbolV5));
  }();
  return plugin;
}

}  // namespace

uint64_t communicatorId(const char* segment_name) {
  uint64_t h = 14695981039346656037ull;
  for (const char* p = segment_name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return h;
}

std::unique_ptr<ProfilerHooks> ProfilerHooks::attach(uint64_t comm_id, const char* comm_name, int nnodes,
                                                     int nranks, int rank) {
  const np::ProfilerV5* plugin = loadPlugin();
  if (plugin == nullptr || plugin->init == nullptr) return nullptr;
  void* context = nullptr;
  // Communicators of one group are made on several threads; their inits write one mask.
  static std::mutex init_mutex;
  std::lock_guard<std::mutex> lock(init_mutex);
  if (plugin->init(&context, comm_id, &g_event_mask, comm_name, nnodes, nranks, rank, nullptr) != ncclSuccess)
    return nullptr;
  return std::unique_ptr<ProfilerHooks>(new ProfilerHooks(plugin, context, rank));
}

ProfilerHooks::~ProfilerHooks() { plugin_->finalize(context_); }

int ProfilerHooks::mask() const { return __atomic_load_n(&g_event_mask, __ATOMIC_RELAXED); }

void* ProfilerHooks::start(np::EventDescr& descr) {
  void* handle = nullptr;
  plugin_->startEvent(context_, &handle, &descr);
  return handle;
}

void ProfilerHooks::record(void* handle, np::EventState state, np::EventStateArgs* args) {
  if (handle != nullptr) plugin_->recordEventState(handle, state, args);
}

void ProfilerHooks::stop(void* handle) {
  if (handle != nullptr) plugin_->stopEvent(handle);
}

}  // namespace simnccl
