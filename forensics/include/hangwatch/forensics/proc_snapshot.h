#pragma once
// What /proc tells about a process without attaching to it: threads with their
// names, states and kernel wait channels, the executable, command line and maps.
// Always readable (for another user's process only partly), so it is both the
// first pass of every collection and the whole output when ptrace is refused.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hangwatch/common/expected.h"

namespace hangwatch::forensics {

struct ProcThread {
  int64_t tid = 0;
  std::string comm;
  std::string state;  // letter from /proc/<pid>/task/<tid>/stat, e.g. "S"
  std::string wchan;  // empty when the kernel hides it or the thread runs
};

struct ProcMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  std::string perms;
  uint64_t offset = 0;
  std::string path;
};

struct ProcSnapshot {
  pid_t pid = 0;
  std::string exe;
  std::vector<std::string> cmdline;
  std::string state;  // "S (sleeping)", "Z (zombie)", ...
  std::optional<uid_t> uid;
  pid_t tracer_pid = 0;
  std::vector<ProcThread> threads;
  std::vector<ProcMapping> maps;
  std::vector<std::string> errors;  // what could not be read, e.g. maps of another user's process

  bool isZombie() const { return !state.empty() && (state[0] == 'Z' || state[0] == 'X'); }
  bool isStopped() const { return !state.empty() && state[0] == 'T'; }
  // Whether any mapped object's file name contains `needle` (e.g. "libsimnccl").
  bool mapsObject(std::string_view needle) const;
};

// Error only when the process does not exist (or /proc is not mounted).
Expected<ProcSnapshot> readProcSnapshot(pid_t pid, const std::string& proc_root = "/proc");

// The process's environment (/proc/<pid>/environ), as it was at exec; empty when unreadable.
std::map<std::string, std::string> readProcEnvironment(pid_t pid);

// Thread ids in /proc/<pid>/task, ascending; empty when the process is gone.
std::vector<int64_t> listThreadIds(pid_t pid, const std::string& proc_root = "/proc");

// One thread's name, state and wait channel; empty fields when it is gone.
ProcThread readProcThread(pid_t pid, int64_t tid, const std::string& proc_root = "/proc");

// "State" of /proc/<pid>/status, e.g. "S (sleeping)"; empty when gone.
std::string readProcessState(pid_t pid, const std::string& proc_root = "/proc");

// The value after "<key>:" in a /proc/<pid>/status text, trimmed; nullopt when absent.
std::optional<std::string> statusField(std::string_view status_text, std::string_view key);
// The state letter of a /proc/<pid>/stat line (after the parenthesised comm, which may hold spaces).
std::optional<std::string> statStateLetter(std::string_view stat_text);
std::optional<ProcMapping> parseMapsLine(std::string_view line);
// /proc/<pid>/cmdline is NUL-separated.
std::vector<std::string> splitCmdline(std::string_view raw);

}  // namespace hangwatch::forensics
