#include "hangwatch/simgpu/nccl/debug_log.h"

#include <cuda_runtime_api.h>
#include <limits.h>
#include <nccl.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <utility>

namespace simnccl {
namespace {

constexpr int kUnread = -1;

// The state ncclDebugInit fills (src/debug.cc:23-41).
std::atomic<int> g_debug_level{kUnread};
uint64_t g_debug_mask = 0;
uint32_t g_timestamp_levels = 0;
std::FILE* g_debug_file = stdout;
char g_host[1024];
int g_pid = -1;
std::chrono::steady_clock::time_point g_epoch;
std::mutex g_debug_mutex;
thread_local int t_tid = -1;

int levelNamed(const char* name) {
  for (const auto& [n, level] : {std::pair{"VERSION", kLogVersion}, {"WARN", kLogWarn}, {"INFO", kLogInfo},
                                 {"ABORT", kLogAbort}, {"TRACE", kLogTrace}})
    if (strcasecmp(name, n) == 0) return level;
  return kLogNone;
}

uint64_t subsysNamed(const char* name) {
  static constexpr std::pair<const char*, uint64_t> kNames[] = {
      {"INIT", subsys::kInit},   {"COLL", subsys::kColl},   {"P2P", subsys::kP2p},
      {"SHM", subsys::kShm},     {"NET", subsys::kNet},     {"GRAPH", subsys::kGraph},
      {"TUNING", subsys::kTuning}, {"ENV", subsys::kEnv},   {"ALLOC", subsys::kAlloc},
      {"CALL", subsys::kCall},   {"PROXY", subsys::kProxy}, {"NVLS", subsys::kNvls},
      {"BOOTSTRAP", subsys::kBootstrap}, {"REG", subsys::kReg}, {"PROFILE", subsys::kProfile},
      {"RAS", subsys::kRas},     {"ALL", subsys::kAll}};
  for (const auto& [n, bits] : kNames)
    if (strcasecmp(name, n) == 0) return bits;
  return 0;  // NCCL ignores a name it does not know
}

// NCCL_DEBUG_SUBSYS and NCCL_DEBUG_TIMESTAMP_LEVELS share this shape (src/debug.cc:73-118,
// 131-165): a comma list of names, all bits but those when it starts with '^'.
template <typename Bits, typename Named>
Bits parseNameList(const char* list, Bits unset, Named&& named) {
  if (list == nullptr) return unset;
  const bool invert = list[0] == '^';
  Bits bits = invert ? static_cast<Bits>(~Bits{0}) : Bits{0};
  std::string copy(list + (invert ? 1 : 0));
  char* save = nullptr;
  for (char* name = strtok_r(copy.data(), ",", &save); name != nullptr; name = strtok_r(nullptr, ",", &save)) {
    const Bits b = named(name);
    bits = invert ? (bits & ~b) : (bits | b);
  }
  return bits;
}

uint32_t timestampLevelNamed(const char* name) {
  if (strcasecmp(name, "ALL") == 0) return ~0u;
  const int level = levelNamed(name);
  return level == kLogNone ? 0 : 1u << level;
}

// NCCL_DEBUG_FILE with %h, %p and %% expanded, anything else after '%' echoed (src/debug.cc:228-262).
std::string expandFileName(const char* pattern) {
  std::string out;
  for (const char* c = pattern; *c != '\0' && out.size() < PATH_MAX; ++c) {
    if (*c != '%') {
      out += *c;
      continue;
    }
    const char spec = *++c;
    if (spec == '%') out += '%';
    else if (spec == 'h') out += g_host;
    else if (spec == 'p') out += std::to_string(g_pid);
    else {
      out += '%';
      if (spec == '\0') break;
      out += spec;
    }
  }
  return out.substr(0, PATH_MAX);
}

// getHostName(hostname, 1024, '.') (src/misc/utils.cc:58).
void readHostName() {
  if (gethostname(g_host, sizeof(g_host)) != 0) std::snprintf(g_host, sizeof(g_host), "unknown");
  g_host[sizeof(g_host) - 1] = '\0';
  if (char* dot = std::strchr(g_host, '.')) *dot = '\0';
}

// ncclDebugInit (src/debug.cc:44), under g_debug_mutex. Timestamps use NCCL's default format
// "[%F %T] "; NCCL_DEBUG_TIMESTAMP_FORMAT is not read.
void debugInit() {
  if (g_debug_file != stdout) std::fclose(g_debug_file);  // a reset (ncclResetDebugInit)
  g_debug_file = stdout;
  const char* level_env = std::getenv("NCCL_DEBUG");
  const int level = level_env == nullptr ? kLogNone : levelNamed(level_env);
  g_debug_mask = parseNameList<uint64_t>(std::getenv("NCCL_DEBUG_SUBSYS"),
                                   subsys::kInit | subsys::kBootstrap | subsys::kEnv, subsysNamed);
  g_timestamp_levels =
      parseNameList<uint32_t>(std::getenv("NCCL_DEBUG_TIMESTAMP_LEVELS"), 1u << kLogWarn, timestampLevelNamed);
  readHostName();
  g_pid = getpid();
  const char* file_env = std::getenv("NCCL_DEBUG_FILE");
  if (level > kLogVersion && file_env != nullptr) {
    const std::string name = expandFileName(file_env);
    if (!name.empty()) {
      if (std::FILE* f = std::fopen(name.c_str(), "w")) {
        setlinebuf(f);
        g_debug_file = f;
      }
    }
  }
  g_epoch = std::chrono::steady_clock::now();
  g_debug_level.store(level, std::memory_order_release);
}

// The levels' prefixes (src/debug.cc:333-378), after the timestamp and "<host>:<pid>:<tid> ".
size_t formatPrefix(char* buf, size_t size, int level, uint64_t flags, int cuda_dev, const char* filefunc, int line) {
  int n = 0;
  if (level == kLogWarn) {
    n = std::snprintf(buf, size, "[%d] %s:%d NCCL WARN ", cuda_dev, filefunc, line);
  } else if (level == kLogInfo) {
    n = std::snprintf(buf, size, "[%d] NCCL INFO ", cuda_dev);
  } else if (level == kLogTrace && flags == subsys::kCall) {
    n = std::snprintf(buf, size, "NCCL CALL ");
  } else if (level == kLogTrace) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - g_epoch).count();
    n = std::snprintf(buf, size, "[%d] %f %s:%d NCCL TRACE ", cuda_dev, ms, filefunc, line);
  }
  return static_cast<size_t>(std::max(n, 0));
}

size_t formatTimestamp(char* buf, size_t size) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  std::tm now;
  localtime_r(&ts.tv_sec, &now);
  return std::strftime(buf, size, "[%F %T] ", &now);
}

// The body of ncclDebugLog once the line is to be printed (src/debug.cc:290-394), under g_debug_mutex.
void writeLine(int level, uint64_t flags, int cuda_dev, const char* filefunc, int line, const char* fmt,
               va_list args) {
  if (t_tid == -1) t_tid = static_cast<int>(syscall(SYS_gettid));
  char buffer[1024];
  size_t len = 0;
  if (level == kLogWarn) buffer[len++] = '\n';
  if (g_timestamp_levels & (1u << level)) len += formatTimestamp(buffer + len, sizeof(buffer) - len);
  len = std::min(len, sizeof(buffer) - 1);
  if (level != kLogVersion) {
    len += static_cast<size_t>(std::snprintf(buffer + len, sizeof(buffer) - len, "%s:%d:%d ", g_host, g_pid, t_tid));
    len = std::min(len, sizeof(buffer) - 1);
  }
  len += formatPrefix(buffer + len, sizeof(buffer) - len, level, flags, cuda_dev, filefunc, line);
  len = std::min(len, sizeof(buffer) - 1);
  const int n = std::vsnprintf(buffer + len, sizeof(buffer) - len, fmt, args);
  len = std::min(len + static_cast<size_t>(std::max(n, 0)), sizeof(buffer) - 1);
  buffer[len++] = '\n';
  std::fwrite(buffer, 1, len, g_debug_file);
}

// cuda_dev < 0: the calling thread's device, except for NCCL_CALL traces, as ncclDebugLog
// reads it (0 when the thread has none).
void logLine(int cuda_dev, int level, uint64_t flags, const char* filefunc, int line, const char* fmt,
             va_list args) {
  const int got = g_debug_level.load(std::memory_order_acquire);
  if (got >= 0 && (got < level || (flags & g_debug_mask) == 0)) return;
  std::lock_guard<std::mutex> lock(g_debug_mutex);
  if (g_debug_level.load(std::memory_order_relaxed) < 0) debugInit();
  if (g_debug_level.load(std::memory_order_relaxed) < level || (flags & g_debug_mask) == 0) return;
  if (cuda_dev < 0) {
    cuda_dev = 0;
    if (!(level == kLogTrace && flags == subsys::kCall)) (void)cudaGetDevice(&cuda_dev);
  }
  writeLine(level, flags, cuda_dev, filefunc, line, fmt, args);
}

}  // namespace

bool debugEnabled(int level, uint64_t flags) {
  if (g_debug_level.load(std::memory_order_acquire) < 0) {
    std::lock_guard<std::mutex> lock(g_debug_mutex);
    if (g_debug_level.load(std::memory_order_relaxed) < 0) debugInit();
  }
  return g_debug_level.load(std::memory_order_acquire) >= level && (flags & g_debug_mask) != 0;
}

void debugLogV(int level, uint64_t flags, const char* filefunc, int line, const char* fmt, va_list args) {
  logLine(-1, level, flags, filefunc, line, fmt, args);
}

void debugLog(int level, uint64_t flags, const char* filefunc, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  logLine(-1, level, flags, filefunc, line, fmt, args);
  va_end(args);
}

void debugLogOnDevice(int cuda_dev, int level, uint64_t flags, const char* filefunc, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  logLine(std::max(cuda_dev, 0), level, flags, filefunc, line, fmt, args);
  va_end(args);
}

void resetDebugLog() {
  std::lock_guard<std::mutex> lock(g_debug_mutex);
  g_debug_level.store(kUnread, std::memory_order_release);
}

void showVersionOnce(int rank) {
  (void)debugEnabled(kLogNone, 0);  // NCCL has read NCCL_DEBUG by then (bootstrapNetInit logs)
  const int level = g_debug_level.load(std::memory_order_acquire);
  if (!(level > kLogWarn || (level != kLogNone && rank == 0))) return;
  static std::once_flag once;
  std::call_once(once, [level] {
    char version[64];
    std::snprintf(version, sizeof(version), "NCCL version %d.%d.%d%s+cuda%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                  NCCL_SUFFIX, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    if (level == kLogVersion || level == kLogWarn)
      debugLog(kLogVersion, subsys::kAll, "init.cc", 606, "%s", version);
    else
      debugLog(kLogInfo, subsys::kAll, "showVersion", 608, "%s", version);
  });
}

}  // namespace simnccl
