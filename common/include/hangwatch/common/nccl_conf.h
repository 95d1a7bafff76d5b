#pragma once
// NCCL's conf files, read as NCCL 2.28 reads them (src/misc/param.cc): NCCL_CONF_FILE,
// or ~/.nccl.conf when that is unset, then /etc/nccl.conf; "VAR=VALUE" lines, '#'
// comment lines; each file fills only variables still unset. Shared by simnccl, which
// applies them as NCCL does, and the watchdog, which must see a profiler plugin named there.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hangwatch {

using EnvLookup = std::function<const char*(const char*)>;

// The files in the order NCCL reads them.
std::vector<std::string> ncclConfFiles(const EnvLookup& env);
// Every "VAR=VALUE" line of one file, in order; none when it cannot be read.
std::vector<std::pair<std::string, std::string>> ncclConfEntries(const std::string& path);
// What NCCL would take for `var` from the files alone: the first file that sets it.
std::optional<std::string> ncclConfValue(const std::vector<std::string>& files, const std::string& var);

}  // namespace hangwatch
