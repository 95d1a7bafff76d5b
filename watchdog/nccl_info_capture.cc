// At library load, before NCCL reads its environment: where NCCL's INFO lines that name each
// connection's NIC will be written (nccl_info_log.h). Only in libhangwatch.so: a program that
// links the watchdog's parts (the unit tests) keeps NCCL's logging as it is.
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "hangwatch/watchdog/dump_storage.h"
#include "hangwatch/watchdog/nccl_info_log.h"

namespace {

using namespace hangwatch::watchdog;

// Runs while the process is still single-threaded (library load), so setenv cannot race a reader.
__attribute__((constructor)) void chooseWhereNcclLogs() {
  const hangwatch::EnvLookup env = [](const char* name) { return std::getenv(name); };
  if (const char* v = env("HANGWATCH_DISABLE"); v != nullptr && std::string_view(v) == "1") return;
  char cwd[PATH_MAX] = {};
  if (getcwd(cwd, sizeof(cwd)) == nullptr) cwd[0] = '\0';
  NcclInfoLogChoice choice =
      chooseNcclInfoLog(env, hangwatch::ncclConfFiles(env), fallbackRootFromEnv(env) + "/nccl-info", cwd);
  for (const auto& [name, value] : choice.set_env) setenv(name.c_str(), value.c_str(), 1);
  setNcclInfoLogChoice(std::move(choice));
}

__attribute__((destructor)) void dropUnusedNcclLog() { removeOwnNcclInfoLog(); }

}  // namespace
