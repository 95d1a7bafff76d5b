#include "hangwatch/common/nccl_profiler_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstring>
#include <sstream>

namespace hangwatch::nccl_profiler {
namespace {

constexpr const char* kStaticPlugin = "STATIC_PLUGIN";

// tryOpenLib: a name that is a case-insensitive prefix of STATIC_PLUGIN opens the program.
LibraryCandidate candidate(const std::string& name) {
  const bool program = !name.empty() && name.size() <= std::strlen(kStaticPlugin) &&
                       strncasecmp(name.c_str(), kStaticPlugin, name.size()) == 0;
  return {name, program};
}

bool isBareName(const std::string& name) {
  const bool lib_so = name.rfind("lib", 0) == 0 && name.size() >= 3 && name.compare(name.size() - 3, 3, ".so") == 0;
  return name.find('/') == std::string::npos && !lib_so;
}

// src/plugin/net.cc, initPluginLibsOnceFunc: the names NCCL loads NET plugins from.
std::vector<std::string> netPluginNames(const EnvLookup& env) {
  const char* list = env("NCCL_NET_PLUGIN");
  if (list == nullptr) return {"libnccl-net.so"};
  if (strcasecmp(list, "none") == 0) return {};
  std::vector<std::string> names;
  std::istringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);  // strtok_r skips empty fields
  return names;
}

bool hasNetInterface(void* lib) {
  for (int v = 11; v >= 6; --v)
    if (dlsym(lib, ("ncclNet_v" + std::to_string(v)).c_str()) != nullptr) return true;
  return false;
}

}  // namespace

std::vector<LibraryCandidate> pluginLibraryCandidates(const char* prefix, const char* name) {
  const std::string given = name != nullptr ? name : "";
  if (given.empty()) return {candidate(std::string(prefix) + ".so")};
  std::vector<LibraryCandidate> out = {candidate(given)};
  if (isBareName(given)) out.push_back(candidate(std::string(prefix) + "-" + given + ".so"));
  return out;
}

PluginLibrary openPluginLibrary(const char* prefix, const char* name, int extra_dlopen_flags) {
  for (const LibraryCandidate& c : pluginLibraryCandidates(prefix, name)) {
    void* handle = dlopen(c.program ? nullptr : c.name.c_str(), RTLD_NOW | RTLD_LOCAL | extra_dlopen_flags);
    if (handle != nullptr) return {handle, c.program ? "" : c.name};
  }
  dlerror();  // NCCL logs the failures at INFO level only
  return {};
}

PluginLibrary openNetPluginLibrary(const EnvLookup& env, int extra_dlopen_flags) {
  for (const std::string& name : netPluginNames(env)) {
    PluginLibrary lib = openPluginLibrary("libnccl-net", name.c_str(), extra_dlopen_flags);
    if (!lib) continue;
    if (hasNetInterface(lib.handle)) return lib;
    dlclose(lib.handle);  // ncclNetPluginLoad: "External network plugin ... is unsupported"
  }
  return {};
}

PluginLibrary openProfilerLibrary(const char* name, const EnvLookup& env, int net_extra_dlopen_flags) {
  if (PluginLibrary lib = openPluginLibrary("libnccl-profiler", name, 0)) return lib;
  return openNetPluginLibrary(env, net_extra_dlopen_flags);
}

ProfilerInterface profilerInterface(const SymbolLookup& lookup) {
  if (auto* v5 = static_cast<const ProfilerV5*>(lookup(kSymbolV5))) return {v5, 5};
  if (auto* v4 = static_cast<const ProfilerV4*>(lookup(kSymbolV4))) return {adaptV4(v4), 4};
  return {};
}

}  // namespace hangwatch::nccl_profiler
