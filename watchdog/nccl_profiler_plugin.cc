// libhangwatch.so is also an NCCL profiler plugin (metrics/link_profiler.h). NCCL
// loads the library NCCL_PROFILER_PLUGIN names; at load time, unless the job already
// chose a plugin or HANGWATCH_LINK_PROFILER=0, that becomes this library itself.
#include <dlfcn.h>

#include <cstdlib>
#include <string_view>

#include "link_profiler.h"

extern "C" {
__attribute__((visibility("default"))) hangwatch::nccl_profiler::ProfilerV5 ncclProfiler_v5 =
    hangwatch::watchdog::linkProfiler();
}

namespace {

bool envIs(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v != nullptr && value == v;
}

// Runs while the process is still single-threaded (library load), before any
// communicator exists, so setenv cannot race a reader.
__attribute__((constructor)) void offerLinkProfiler() {
  if (envIs("HANGWATCH_DISABLE", "1") || envIs("HANGWATCH_LINK_PROFILER", "0")) return;
  if (const char* chosen = std::getenv("NCCL_PROFILER_PLUGIN"); chosen != nullptr && *chosen != '\0') return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ncclProfiler_v5), &info) == 0 || info.dli_fname == nullptr) return;
  setenv("NCCL_PROFILER_PLUGIN", info.dli_fname, 0);
}

}  // namespace
