#include "hangwatch/forensics/debugger_session.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/common/child_process.h"
#include "hangwatch/forensics/proc_snapshot.h"

#ifndef HANGWATCH_GDB_SCRIPTS_DIR
#define HANGWATCH_GDB_SCRIPTS_DIR "gdb-scripts"
#endif
// Where the scripts are seen from bin/ in the install layout (packaging/install.cmake).
#ifndef HANGWATCH_BIN_TO_GDB_SCRIPTS
#define HANGWATCH_BIN_TO_GDB_SCRIPTS "../share/hangwatch/gdb-scripts"
#endif

namespace hangwatch::forensics {
namespace {

constexpr size_t kOutputLimit = 64 * 1024;
constexpr const char* kBegin = "HANGWATCH-DEBUGGER-BEGIN\n";
constexpr const char* kEnd = "\nHANGWATCH-DEBUGGER-END";

bool stoppedNow(pid_t pid) {
  std::string s = readProcessState(pid);
  return !s.empty() && s[0] == 'T';
}

std::optional<nlohmann::json> markedReport(const std::string& output) {
  size_t b = output.find(kBegin);
  if (b == std::string::npos) return std::nullopt;
  b += std::strlen(kBegin);
  size_t e = output.find(kEnd, b);
  if (e == std::string::npos) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(output.substr(b, e - b), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace

Expected<std::string> DebuggerSession::locate(const char* configured) {
  if (configured != nullptr && *configured != '\0') {
    std::string d = configured;
    if (d.find('/') == std::string::npos) {
      if (auto found = findExecutableOnPath(d)) return *found;
      return Error{"debugger '" + d + "' (HANGWATCH_DEBUGGER) not found on PATH"};
    }
    if (::access(d.c_str(), X_OK) != 0) {
      return Error{"debugger " + d + " (HANGWATCH_DEBUGGER) is not executable: " + std::strerror(errno)};
    }
    return d;
  }
  if (auto cuda = findExecutableOnPath("cuda-gdb")) return *cuda;
  if (auto gdb = findExecutableOnPath("gdb")) return *gdb;
  return Error{"no debugger: neither cuda-gdb nor gdb is on PATH (set HANGWATCH_DEBUGGER)"};
}

Expected<DebuggerChoice> DebuggerSession::locateFor(const std::string& backend, const char* configured) {
  if (configured != nullptr && *configured != '\0') {
    Expected<std::string> path = locate(configured);
    if (!path) return Error{path.error()};
    DebuggerChoice c{*path, isCudaGdb(*path), ""};
    if (backend == "cuda" && !c.cuda_gdb)
      c.shortfall = "HANGWATCH_DEBUGGER is " + *path + ", not cuda-gdb: the kernel's registers and device memory "
                    "are not read (NCCL's host structures only)";
    return c;
  }
  if (backend == "cuda") {
    if (auto cuda = findExecutableOnPath("cuda-gdb")) return DebuggerChoice{*cuda, true, ""};
    if (auto gdb = findExecutableOnPath("gdb"))
      return DebuggerChoice{*gdb, false,
                            "cuda-gdb is not on PATH: gdb read NCCL's host structures only (no kernel registers, no "
                            "device memory); install cuda-gdb or set HANGWATCH_DEBUGGER"};
    return Error{"no debugger for the cuda backend: neither cuda-gdb nor gdb is on PATH (set HANGWATCH_DEBUGGER)"};
  }
  if (auto gdb = findExecutableOnPath("gdb")) return DebuggerChoice{*gdb, false, ""};
  if (auto cuda = findExecutableOnPath("cuda-gdb")) return DebuggerChoice{*cuda, true, ""};
  return Error{"no debugger for the " + backend + " backend: gdb is not on PATH (set HANGWATCH_DEBUGGER)"};
}

bool DebuggerSession::isCudaGdb(const std::string& debugger) {
  return debugger.find("cuda-gdb") != std::string::npos;
}

std::string DebuggerSession::scriptPath(const std::string& name) {
  if (const char* dir = std::getenv("HANGWATCH_GDB_SCRIPTS"); dir && *dir) return std::string(dir) + "/" + name;
  std::error_code ec;
  return scriptsDirFor(std::filesystem::read_symlink("/proc/self/exe", ec).string()) + "/" + name;
}

std::string DebuggerSession::scriptsDirFor(const std::string& exe) {
  if (!exe.empty()) {
    // /proc/self/exe has no symlinks left, so resolving ".." by name is exact.
    auto installed = (std::filesystem::path(exe).parent_path() / HANGWATCH_BIN_TO_GDB_SCRIPTS).lexically_normal();
    std::error_code ec;
    if (std::filesystem::is_regular_file(installed / "collector_probe.py", ec)) return installed.string();
  }
  return HANGWATCH_GDB_SCRIPTS_DIR;
}

std::optional<std::string> DebuggerSession::indexCacheDir(const char* tmpdir, bool fills) {
  std::string root = tmpdir != nullptr && *tmpdir == '/' ? tmpdir : "/var/tmp";
  std::string dir = fmt::format("{}/hangwatch-gdb-index-{}", root, ::geteuid());
  if (fills) (void)::mkdir(dir.c_str(), 0700);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return std::nullopt;
  if (!fills) {
    std::error_code ec;
    if (std::filesystem::is_empty(dir, ec) || ec) return std::nullopt;
  }
  return dir;
}

std::vector<std::string> DebuggerSession::indexCacheCommands(const std::string& dir) {
  // A debugger without the setting (gdb before 13 spells it `set index-cache on`) says so and goes on.
  return {"set index-cache directory " + dir, "set index-cache enabled on"};
}

Expected<DebuggerRun> DebuggerSession::run(const std::string& debugger, pid_t pid, const std::string& script,
                                           Deadline deadline,
                                           const std::vector<std::pair<std::string, std::string>>& env,
                                           const std::vector<std::string>& before_attach) {
  DebuggerRun result;
  result.debugger = debugger;
  bool was_stopped = stoppedNow(pid);

  ChildCommand command{debugger, {"-nx", "-batch"}, {}, env, ""};
  // cuda-gdb allows one instance per machine unless told otherwise; ranks collect in parallel.
  if (isCudaGdb(debugger)) command.args.push_back("--cuda-use-lockfile=0");
  for (const std::string& c : before_attach) command.args.insert(command.args.end(), {"-iex", c});
  command.args.insert(command.args.end(), {"-p", fmt::format("{}", pid), "-x", script});
  Expected<ChildProcess> child = ChildProcess::start(command);
  if (!child) return Error{child.error()};
  // The collector holds ptrace stops: every waitpid here goes through its WaitManager.
  result.timed_out = !child->readOutput(deadline, result.output, kOutputLimit);

  WaitStatus status = result.timed_out ? WaitStatus{} : waits_.waitFor(child->pid(), deadline);
  if (status.kind == WaitStatus::Kind::kTimedOut) {
    result.timed_out = true;
    // The kernel detaches the debugger's tracees when it dies.
    child->killSession();
    status = waits_.waitFor(child->pid(), deadlineIn(10));
  }
  if (status.kind == WaitStatus::Kind::kExited) result.exit_code = status.code;
  if (result.output.size() > kOutputLimit) result.output.erase(0, result.output.size() - kOutputLimit);
  result.report = markedReport(result.output);

  // A SIGSTOP that the debugger's PTRACE_ATTACH left pending turns into a group stop
  // only once the target runs again, so look for a short while.
  if (!was_stopped) {
    for (int i = 0; i < 10 && !result.continued_target; ++i) {
      if (stoppedNow(pid)) {
        ::kill(pid, SIGCONT);
        result.continued_target = true;
      } else if (!result.timed_out) {
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  result.target_state_after = readProcessState(pid);
  return result;
}

}  // namespace hangwatch::forensics
