#include "hangwatch/common/dump_mode.h"

#include "hangwatch/common/dump_fs.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace hangwatch {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_mode{kUnset};

mode_t fromEnv(const EnvLookup& env, std::string* warning) {
  const char* v = env ? env("HANGWATCH_DUMP_MODE") : std::getenv("HANGWATCH_DUMP_MODE");
  if (v == nullptr || *v == '\0') return kDefaultDumpMode;
  Expected<mode_t> m = parseDumpMode(v);
  if (m) return *m;
  if (warning) *warning = "HANGWATCH_DUMP_MODE=" + std::string(v) + ": " + m.error() + "; using 0640";
  return kDefaultDumpMode;
}

}  // namespace

Expected<mode_t> parseDumpMode(const std::string& text) {
  if (text.empty() || text.size() > 4) return Error{"expected an octal mode such as 0640"};
  mode_t m = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return Error{"expected an octal mode such as 0640"};
    m = m * 8 + static_cast<mode_t>(c - '0');
  }
  if (m > 0777) return Error{"only permission bits (up to 0777)"};
  if ((m & 0600) != 0600) return Error{"the owner must be able to read and write its own dumps"};
  return m;
}

mode_t dumpFileMode(std::string* warning) {
  int m = g_mode.load(std::memory_order_acquire);
  if (m == kUnset) {
    m = static_cast<int>(fromEnv(nullptr, warning));
    g_mode.store(m, std::memory_order_release);
  }
  return static_cast<mode_t>(m);
}

void setDumpModeFromEnv(const EnvLookup& env, std::string* warning) {
  g_mode.store(static_cast<int>(fromEnv(env, warning)), std::memory_order_release);
}

mode_t dumpDirMode() {
  const mode_t f = dumpFileMode();
  // Search permission for whoever may read: r (4) gives x (1) in each class.
  return f | ((f & 0444) >> 2);
}

void applyDumpMode(int fd) {
  if (fd >= 0) ::fchmod(fd, dumpFileMode());
}

Expected<bool> makeDumpDirs(const std::string& dir) { return dumpFs().makeDirs(dir, dumpDirMode()); }

}  // namespace hangwatch
