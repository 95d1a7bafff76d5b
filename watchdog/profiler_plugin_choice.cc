#include "hangwatch/watchdog/profiler_plugin_choice.h"

#include <strings.h>

namespace hangwatch::watchdog {
namespace {

bool is(const char* v, const char* value) { return v != nullptr && std::string(v) == value; }

}  // namespace

ProfilerPluginChoice chooseProfilerPlugin(const EnvLookup& env, const std::string& own_path,
                                          const std::vector<std::string>& conf_files) {
  ProfilerPluginChoice choice;
  if (is(env("HANGWATCH_DISABLE"), "1") || is(env("HANGWATCH_LINK_PROFILER"), "0") || own_path.empty())
    return choice;
  std::optional<std::string> job;
  if (const char* v = env("NCCL_PROFILER_PLUGIN"); v != nullptr) {  // set, even empty, hides the conf files
    job = v;
  } else {
    job = ncclConfValue(conf_files, "NCCL_PROFILER_PLUGIN");
  }
  if (job && *job == own_path) {
    // A parent process already put hangwatch in front: keep the job's choice it passed down.
    choice.offer_hangwatch = true;
    return choice;
  }
  if (job && strcasecmp(job->c_str(), "none") == 0) return choice;  // the job turned profiling off
  choice.offer_hangwatch = true;
  choice.job_plugin = job.value_or("");
  return choice;
}

}  // namespace hangwatch::watchdog
