#include "hangwatch/common/nccl_conf.h"

#include <pwd.h>
#include <unistd.h>

#include <fstream>

namespace hangwatch {

std::vector<std::string> ncclConfFiles(const EnvLookup& env) {
  std::vector<std::string> files;
  if (const char* user = env("NCCL_CONF_FILE"); user != nullptr && *user != '\0') {
    files.emplace_back(user);
  } else if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    files.push_back(std::string(pw->pw_dir) + "/.nccl.conf");
  }
  files.emplace_back("/etc/nccl.conf");
  return files;
}

std::vector<std::pair<std::string, std::string>> ncclConfEntries(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    entries.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return entries;
}

std::optional<std::string> ncclConfValue(const std::vector<std::string>& files, const std::string& var) {
  for (const std::string& file : files)
    for (const auto& [name, value] : ncclConfEntries(file))
      if (name == var) return value;  // setenv(..., 0): the first one stays
  return std::nullopt;
}

}  // namespace hangwatch
