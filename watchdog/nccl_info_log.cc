#include "hangwatch/watchdog/nccl_info_log.h"

#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>

namespace hangwatch::watchdog {
namespace {

// The environment first, then NCCL's conf files, as NCCL takes a variable (src/misc/param.cc).
std::optional<std::string> ncclVar(const EnvLookup& env, const std::vector<std::string>& conf, const char* name) {
  if (const char* v = env(name)) return std::string(v);
  return ncclConfValue(conf, name);
}

bool isLevel(const std::string& v, const char* level) { return strcasecmp(v.c_str(), level) == 0; }

// Whether NCCL_DEBUG_SUBSYS lets the lines through: each is logged under INIT|NET, and NCCL
// prints a line when any of its flags is in the mask (src/debug.cc). Unset: INIT,BOOTSTRAP,ENV.
bool subsystemsPrintNetLines(const std::optional<std::string>& subsys) {
  if (!subsys) return true;
  std::string_view list = *subsys;
  const bool invert = !list.empty() && list.front() == '^';
  if (invert) list.remove_prefix(1);
  bool init = false, net = false;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string item(list.substr(0, comma));
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
    const bool all = strcasecmp(item.c_str(), "ALL") == 0;
    init = init || all || strcasecmp(item.c_str(), "INIT") == 0;
    net = net || all || strcasecmp(item.c_str(), "NET") == 0;
  }
  return invert ? !(init && net) : (init || net);
}

// A directory the watchdog can write its file in: made (with its parents) when missing.
std::string makeWritableDir(const std::string& dir) {
  std::string path;
  for (size_t at = 0; at != std::string::npos;) {
    const size_t next = dir.find('/', at + 1);
    path = dir.substr(0, next);
    if (!path.empty() && mkdir(path.c_str(), 0777) != 0 && errno != EEXIST)
      return "cannot make " + path + ": " + std::strerror(errno);
    at = next;
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) return "cannot write in " + dir + ": " + std::strerror(errno);
  return "";
}

// "[time] host:pid:tid [dev] NCCL INFO <message>": the pid, or -1 when the line is not NCCL's.
long linePid(std::string_view line, std::string_view* message) {
  static constexpr std::string_view kInfo = " NCCL INFO ";
  const size_t info = line.find(kInfo);
  if (info == std::string_view::npos) return -1;
  *message = line.substr(info + kInfo.size());
  std::string_view prefix = line.substr(0, info);
  const size_t dev = prefix.rfind(" [");
  if (dev == std::string_view::npos) return -1;
  prefix = prefix.substr(0, dev);
  prefix = prefix.substr(prefix.rfind(' ') == std::string_view::npos ? 0 : prefix.rfind(' ') + 1);  // after a timestamp
  const size_t tid = prefix.rfind(':');
  if (tid == std::string_view::npos || tid == 0) return -1;
  const size_t pid = prefix.rfind(':', tid - 1);
  if (pid == std::string_view::npos) return -1;
  long value = 0;
  for (char c : prefix.substr(pid + 1, tid - pid - 1)) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

bool saysWhichNic(std::string_view message) {
  auto starts = [&](std::string_view p) { return message.substr(0, p.size()) == p; };
  auto has = [&](std::string_view p) { return message.find(p) != std::string_view::npos; };
  return starts("NET/IB : Using") || starts("NET/Socket : Using") || starts("NET/IB : Made virtual device") ||
         (starts("Channel ") && has(" via NET/")) || has(" - Init START") || has(" - Init COMPLETE");
}

// Made on first use: the choice is set from another object's constructor at library load,
// before this file's globals would be.
struct ChoiceState {
  std::mutex mutex;
  NcclInfoLogChoice choice;
  bool made = false;
  std::atomic<bool> keep{false};
};

ChoiceState& state() {
  static ChoiceState* s = new ChoiceState;  // never destroyed: read from the library's destructor
  return *s;
}

std::string ownFilePattern(const std::string& node_dir) { return node_dir + "/nccl.%h.%p.log"; }

std::string hostForLog() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return std::string(host).substr(0, std::string(host).find('.'));
}

}  // namespace

NcclInfoLogChoice chooseNcclInfoLog(const EnvLookup& env, const std::vector<std::string>& conf,
                                    const std::string& node_dir, const std::string& cwd) {
  NcclInfoLogChoice c;
  if (const char* v = env("HANGWATCH_NCCL_INFO"); v != nullptr && std::string_view(v) == "0") {
    c.unread = "HANGWATCH_NCCL_INFO=0";
    return c;
  }
  const std::optional<std::string> level = ncclVar(env, conf, "NCCL_DEBUG");
  if (!level) {
    if (std::string why = makeWritableDir(node_dir); !why.empty()) {
      c.unread = "NCCL_DEBUG is unset and the watchdog's file could not be made (" + why + ")";
      return c;
    }
    c.file_pattern = ownFilePattern(node_dir);
    c.owned = true;
    c.set_env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT,NET"}, {"NCCL_DEBUG_FILE", c.file_pattern}};
    return c;
  }
  if (!isLevel(*level, "INFO") && !isLevel(*level, "TRACE")) {
    c.unread = "NCCL_DEBUG=" + *level + " prints no INFO line";
    return c;
  }
  if (!subsystemsPrintNetLines(ncclVar(env, conf, "NCCL_DEBUG_SUBSYS"))) {
    c.unread = "NCCL_DEBUG_SUBSYS=" + *ncclVar(env, conf, "NCCL_DEBUG_SUBSYS") + " leaves out INIT and NET";
    return c;
  }
  const std::optional<std::string> file = ncclVar(env, conf, "NCCL_DEBUG_FILE");
  if (!file || file->empty()) {
    c.unread = "NCCL_DEBUG=" + *level + " prints to the job's standard output (no NCCL_DEBUG_FILE)";
    return c;
  }
  c.file_pattern = file->front() == '/' || cwd.empty() ? *file : cwd + "/" + *file;
  // A parent process's watchdog set it (a launcher, a shell that execs the rank): still ours.
  c.owned = c.file_pattern == ownFilePattern(node_dir);
  return c;
}

std::string expandNcclDebugFile(const std::string& pattern, const std::string& host, long pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == '%') out += '%';
    else if (c == 'h') out += host.substr(0, host.find('.'));
    else if (c == 'p') out += std::to_string(pid);
    else out += std::string("%") + c;
  }
  return out;
}

SnapshotNcclLog readNcclInfoLines(const std::string& path, long pid, size_t max_bytes) {
  SnapshotNcclLog log;
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    log.unread = "cannot read " + path + ": " + std::strerror(errno);
    return log;
  }
  log.file = path;
  std::string pending;
  char buffer[1 << 16];
  size_t total = 0;
  auto take = [&](std::string_view line) {
    std::string_view message;
    if (linePid(line, &message) != pid || !saysWhichNic(message)) return;
    if (log.lines.size() < SnapshotNcclLog::kLinesKept) log.lines.emplace_back(line);
    else ++log.lines_dropped;
  };
  while (size_t n = std::fread(buffer, 1, std::min(sizeof(buffer), max_bytes - total), f)) {
    total += n;
    pending.append(buffer, n);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      take(std::string_view(pending).substr(start, nl - start));
    pending.erase(0, start);
    if (total >= max_bytes) {
      log.truncated = std::fgetc(f) != EOF;
      break;
    }
  }
  std::fclose(f);
  return log;
}

void setNcclInfoLogChoice(NcclInfoLogChoice choice) {
  ChoiceState& s = state();
  std::lock_guard lock(s.mutex);
  s.choice = std::move(choice);
  s.made = true;
}

std::optional<SnapshotNcclLog> ncclInfoLogForSnapshot() {
  ChoiceState& s = state();
  NcclInfoLogChoice choice;
  {
    std::lock_guard lock(s.mutex);
    if (!s.made) return std::nullopt;
    choice = s.choice;
  }
  if (choice.file_pattern.empty()) {
    SnapshotNcclLog none;
    none.unread = choice.unread;
    return none;
  }
  s.keep.store(true);
  return readNcclInfoLines(expandNcclDebugFile(choice.file_pattern, hostForLog(), static_cast<long>(getpid())),
                           static_cast<long>(getpid()));
}

void removeOwnNcclInfoLog() {
  ChoiceState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.made || !s.choice.owned || s.keep.load()) return;
  unlink(expandNcclDebugFile(s.choice.file_pattern, hostForLog(), static_cast<long>(getpid())).c_str());
}

}  // namespace hangwatch::watchdog
