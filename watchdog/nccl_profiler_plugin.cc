// libhangwatch.so is also an NCCL profiler plugin (metrics/profiler_chain.h): NCCL loads
// the library NCCL_PROFILER_PLUGIN names, and at load time, unless the job turned NCCL
// profiling off or HANGWATCH_LINK_PROFILER=0, that becomes this library, with the job's
// own choice (environment, NCCL conf files or NCCL's default) loaded behind it.
#include <dlfcn.h>

#include <cstdlib>

#include "hangwatch/watchdog/metrics/profiler_chain.h"
#include "hangwatch/watchdog/profiler_plugin_choice.h"

extern "C" {
__attribute__((visibility("default"))) hangwatch::nccl_profiler::ProfilerV5 ncclProfiler_v5 =
    hangwatch::watchdog::chainedProfiler();
}

namespace {

// Runs while the process is still single-threaded (library load), before any
// communicator exists, so setenv cannot race a reader.
__attribute__((constructor)) void offerLinkProfiler() {
  using namespace hangwatch::watchdog;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ncclProfiler_v5), &info) == 0 || info.dli_fname == nullptr) return;
  const hangwatch::EnvLookup env = [](const char* name) { return std::getenv(name); };
  ProfilerPluginChoice choice = chooseProfilerPlugin(env, info.dli_fname, hangwatch::ncclConfFiles(env));
  if (!choice.offer_hangwatch) return;
  if (choice.job_plugin) setenv(kJobProfilerPluginVar, choice.job_plugin->c_str(), 1);
  setenv("NCCL_PROFILER_PLUGIN", info.dli_fname, 1);
}

}  // namespace
