#pragma once
// How NCCL 2.28 finds its profiler plugin and which interface it takes from it, shared
// by simnccl (which is NCCL on simgpu) and the watchdog's chain (which loads the job's
// plugin behind itself as NCCL would have loaded it alone):
//  - the library (src/plugin/plugin_open.cc, openPluginLib): NCCL_PROFILER_PLUGIN as
//    given ("STATIC_PLUGIN", or any case-insensitive prefix of it, is the program's own
//    global scope), or libnccl-profiler.so when it is unset or empty; a bare name (no '/',
//    not lib*.so) is then also tried as libnccl-profiler-<name>.so; "none" turns
//    profiling off (src/plugin/profiler.cc). When no library opens, the NET plugin's
//    library is used (ncclGetNetPluginLib): the first of NCCL_NET_PLUGIN's comma-separated
//    names ("none": no list; unset: libnccl-net.so), by the same rules with the
//    libnccl-net prefix, that opens and has an ncclNet_v11..v6 (src/plugin/net.cc).
//  - the interface (ncclProfilerPluginLoad): ncclProfiler_v5, else ncclProfiler_v4 seen
//    through NCCL's adaptor (src/plugin/profiler/profiler_v4.cc). v3 and older, which
//    NCCL 2.28 also still takes, are not offered here.
#include <functional>
#include <string>
#include <vector>

#include "hangwatch/common/nccl_conf.h"
#include "hangwatch/common/nccl_profiler_v4.h"
#include "hangwatch/common/nccl_profiler_v5.h"

namespace hangwatch::nccl_profiler {

// One name dlopen is asked for; `program` stands for dlopen(NULL) (a static plugin).
struct LibraryCandidate {
  std::string name;
  bool program = false;
  bool operator==(const LibraryCandidate& o) const { return name == o.name && program == o.program; }
};

// The names NCCL tries, in order, for a plugin of `prefix` ("libnccl-profiler",
// "libnccl-net") named `name` (null or empty: none given).
std::vector<LibraryCandidate> pluginLibraryCandidates(const char* prefix, const char* name);

struct PluginLibrary {
  void* handle = nullptr;   // dlopen's handle, RTLD_NOW | RTLD_LOCAL | extra flags
  std::string opened;       // the candidate that opened ("" for the program)
  explicit operator bool() const { return handle != nullptr; }
};

// `extra_dlopen_flags`: RTLD_NOLOAD takes only a library that is loaded already.
PluginLibrary openPluginLibrary(const char* prefix, const char* name, int extra_dlopen_flags);

// The NET plugin library NCCL loaded for itself (see above); `extra_dlopen_flags` as above.
PluginLibrary openNetPluginLibrary(const EnvLookup& env, int extra_dlopen_flags);

// The profiler plugin's library for NCCL_PROFILER_PLUGIN = `name` (null: unset; the
// caller handles "none"), else the NET plugin's, opened with `net_extra_dlopen_flags`.
PluginLibrary openProfilerLibrary(const char* name, const EnvLookup& env, int net_extra_dlopen_flags);

struct ProfilerInterface {
  const ProfilerV5* table = nullptr;  // v5 calls; for a v4 plugin NCCL's adaptor around it
  int version = 0;                    // 5, 4, or 0 when the library has neither
};

// `lookup(symbol)` resolves a symbol in the plugin's library (dlsym, usually).
using SymbolLookup = std::function<void*(const char* symbol)>;
ProfilerInterface profilerInterface(const SymbolLookup& lookup);

// NCCL's v4 adaptor as a v5 table: descriptors converted (a Coll's or P2p's parent is its
// parentGroup; GroupApi, CollApi, P2pApi and KernelLaunch events are not passed on and
// their handle is left as it was), states without a v4 meaning dropped, init's
// arguments reordered. One v4 plugin per process, as in NCCL.
const ProfilerV5* adaptV4(const ProfilerV4* v4);

}  // namespace hangwatch::nccl_profiler
