#pragma once
// Whether libhangwatch.so offers itself as NCCL's profiler plugin, and which plugin
// the job itself chose, decided at library load. NCCL takes NCCL_PROFILER_PLUGIN from
// the environment, else from its conf files (NCCL_CONF_FILE or ~/.nccl.conf, then
// /etc/nccl.conf, each filling only unset variables: src/misc/param.cc), else loads
// libnccl-profiler.so if there is one. hangwatch takes NCCL_PROFILER_PLUGIN's place and
// loads the job's choice behind itself (metrics/profiler_chain.h), so neither is lost.
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/nccl_conf.h"

namespace hangwatch::watchdog {

struct ProfilerPluginChoice {
  bool offer_hangwatch = false;
  // For HANGWATCH_JOB_PROFILER_PLUGIN: the job's plugin name or path, "" for NCCL's
  // default library; unset (nullopt) when an inherited value must stay as it is.
  std::optional<std::string> job_plugin;
};

// `own_path`: this library's file, as NCCL_PROFILER_PLUGIN would name it; `conf_files`
// as hangwatch::ncclConfFiles lists them.
ProfilerPluginChoice chooseProfilerPlugin(const EnvLookup& env, const std::string& own_path,
                                          const std::vector<std::string>& conf_files);

}  // namespace hangwatch::watchdog
