#include "hangwatch/forensics/proc_snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "hangwatch/common/scoped_fd.h"

namespace hangwatch::forensics {
namespace {

// /proc files report size 0, so read until EOF.
Expected<std::string> readProcFile(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error{path + ": " + std::strerror(errno)};
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{path + ": " + std::strerror(errno)};
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return std::string(s);
}

std::optional<uint64_t> parseHex(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return std::nullopt;
    v = v * 16 + static_cast<uint64_t>(d);
  }
  return v;
}

// Splits off the next space-separated token.
std::string_view nextToken(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  size_t end = s.find(' ');
  std::string_view tok = s.substr(0, end);
  s.remove_prefix(end == std::string_view::npos ? s.size() : end);
  return tok;
}

ProcThread readThread(const std::string& task_dir, int64_t tid) {
  ProcThread t;
  t.tid = tid;
  std::string dir = fmt::format("{}/{}", task_dir, tid);
  if (auto comm = readProcFile(dir + "/comm")) t.comm = trimmed(*comm);
  if (auto stat = readProcFile(dir + "/stat")) t.state = statStateLetter(*stat).value_or("");
  // wchan is "0" for a running thread and empty when the kernel hides it from us.
  if (auto wchan = readProcFile(dir + "/wchan"); wchan && *wchan != "0") t.wchan = trimmed(*wchan);
  return t;
}

}  // namespace

bool ProcSnapshot::mapsObject(std::string_view needle) const {
  return std::any_of(maps.begin(), maps.end(),
                     [&](const ProcMapping& m) { return m.path.find(needle) != std::string::npos; });
}

std::optional<std::string> statusField(std::string_view status_text, std::string_view key) {
  size_t pos = 0;
  while (pos < status_text.size()) {
    size_t eol = status_text.find('\n', pos);
    std::string_view line = status_text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      return trimmed(line.substr(key.size() + 1));
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  return std::nullopt;
}

std::optional<std::string> statStateLetter(std::string_view stat_text) {
  size_t close = stat_text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat_text.size()) return std::nullopt;
  char c = stat_text[close + 2];
  if (c == ' ' || c == '\n') return std::nullopt;
  return std::string(1, c);
}

std::optional<ProcMapping> parseMapsLine(std::string_view line) {
  // start-end perms offset dev inode [path]; the path may contain spaces.
  ProcMapping m;
  std::string_view rest = line;
  std::string_view range = nextToken(rest);
  size_t dash = range.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto start = parseHex(range.substr(0, dash));
  auto end = parseHex(range.substr(dash + 1));
  m.perms = std::string(nextToken(rest));
  auto offset = parseHex(nextToken(rest));
  std::string_view dev = nextToken(rest);
  std::string_view inode = nextToken(rest);
  if (!start || !end || !offset || m.perms.size() != 4 || dev.empty() || inode.empty()) return std::nullopt;
  m.start = *start;
  m.end = *end;
  m.offset = *offset;
  m.path = trimmed(rest);
  return m;
}

std::vector<std::string> splitCmdline(std::string_view raw) {
  std::vector<std::string> out;
  while (!raw.empty()) {
    size_t nul = raw.find('\0');
    out.emplace_back(raw.substr(0, nul));
    if (nul == std::string_view::npos) break;
    raw.remove_prefix(nul + 1);
  }
  return out;
}

std::vector<int64_t> listThreadIds(pid_t pid, const std::string& proc_root) {
  std::vector<int64_t> tids;
  std::string dir = fmt::format("{}/{}/task", proc_root, pid);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return tids;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long v = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) tids.push_back(v);
  }
  ::closedir(d);
  std::sort(tids.begin(), tids.end());
  return tids;
}

ProcThread readProcThread(pid_t pid, int64_t tid, const std::string& proc_root) {
  return readThread(fmt::format("{}/{}/task", proc_root, pid), tid);
}

std::string readProcessState(pid_t pid, const std::string& proc_root) {
  auto status = readProcFile(fmt::format("{}/{}/status", proc_root, pid));
  if (!status) return "";
  return statusField(*status, "State").value_or("");
}

Expected<ProcSnapshot> readProcSnapshot(pid_t pid, const std::string& proc_root) {
  if (pid <= 0) return Error{fmt::format("pid {} is not a process id", pid)};
  std::string base = fmt::format("{}/{}", proc_root, pid);
  auto status = readProcFile(base + "/status");
  if (!status) {
    if (!std::filesystem::exists(base)) return Error{fmt::format("no process with pid {}", pid)};
    return Error{"cannot read " + base + "/status: " + status.error()};
  }
  ProcSnapshot s;
  s.pid = pid;
  s.state = statusField(*status, "State").value_or("");
  if (auto tgid = statusField(*status, "Tgid"); tgid && *tgid != fmt::format("{}", pid)) {
    return Error{fmt::format("pid {} is a thread of process {}, not a process", pid, *tgid)};
  }
  if (auto uid = statusField(*status, "Uid")) s.uid = static_cast<uid_t>(std::strtoul(uid->c_str(), nullptr, 10));
  if (auto tracer = statusField(*status, "TracerPid")) s.tracer_pid = static_cast<pid_t>(std::atoi(tracer->c_str()));

  std::error_code ec;
  auto exe = std::filesystem::read_symlink(base + "/exe", ec);
  if (ec) s.errors.push_back("exe: " + ec.message());
  else s.exe = exe.string();
  if (auto cmdline = readProcFile(base + "/cmdline")) s.cmdline = splitCmdline(*cmdline);
  else s.errors.push_back(cmdline.error());

  if (auto maps = readProcFile(base + "/maps")) {
    std::string_view text = *maps;
    while (!text.empty()) {
      size_t eol = text.find('\n');
      if (auto m = parseMapsLine(text.substr(0, eol))) s.maps.push_back(std::move(*m));
      if (eol == std::string_view::npos) break;
      text.remove_prefix(eol + 1);
    }
  } else {
    s.errors.push_back(maps.error());
  }

  std::string task_dir = base + "/task";
  for (int64_t tid : listThreadIds(pid, proc_root)) s.threads.push_back(readThread(task_dir, tid));
  return s;
}

std::map<std::string, std::string> readProcEnvironment(pid_t pid) {
  std::map<std::string, std::string> env;
  std::ifstream in(fmt::format("/proc/{}/environ", pid), std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace hangwatch::forensics
