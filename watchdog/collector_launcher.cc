#include "hangwatch/watchdog/collector_launcher.h"

#include <dlfcn.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/common/child_process.h"
#include "hangwatch/common/dump_mode.h"

// Where bin/ is seen from lib/ in the install layout (packaging/install.cmake).
#ifndef HANGWATCH_LIB_TO_BIN
#define HANGWATCH_LIB_TO_BIN "../bin"
#endif

namespace hangwatch::watchdog {
namespace {

bool isExecutable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::string CollectorLauncher::findForensicsBinary(const std::string& configured) {
  if (!configured.empty()) return isExecutable(configured) ? configured : "";
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&CollectorLauncher::findForensicsBinary), &info) && info.dli_fname) {
    std::string next_to = forensicsNextTo(std::filesystem::path(info.dli_fname).parent_path().string());
    if (!next_to.empty()) return next_to;
  }
  return findExecutableOnPath("forensics").value_or("");
}

std::string CollectorLauncher::forensicsNextTo(const std::string& library_dir) {
  const std::filesystem::path dir(library_dir);
  for (const auto& candidate : {dir / ".." / "forensics" / "forensics", dir / HANGWATCH_LIB_TO_BIN / "forensics",
                                dir / "forensics", dir / ".." / "bin" / "forensics", dir / "bin" / "forensics"})
    if (isExecutable(candidate)) return std::filesystem::weakly_canonical(candidate).string();
  return "";
}

bool CollectorLauncher::allowTracer(pid_t tracer) {
  return ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(tracer), 0, 0, 0) == 0;
}

double CollectorLauncher::debuggerBoundFor(double wait_s) {
  return std::clamp(wait_s - kFastPhaseBoundS - 5, 5.0, kDebuggerBoundS);
}

namespace {

// A forensics command of this rank's, in its own session, without the watchdog preloaded, its
// output to `log_path`, waited for `wait_s` at most (it runs on, detached, after that). `traces`:
// it attaches to this process (the collector), which Yama then allows it alone.
Expected<CollectorOutcome> runForensics(bool traces, const std::string& binary, std::vector<std::string> args,
                                        const std::string& log_path, double wait_s,
                                        const std::vector<std::pair<std::string, std::string>>& set_env,
                                        const std::function<bool()>& give_up) {
  (void)makeDumpDirs(std::filesystem::path(log_path).parent_path().string());
  ChildCommand command{binary, std::move(args), {}, {}, log_path, dumpFileMode()};
  // The collector and its debugger must not load the watchdog themselves.
  command.unset_env.push_back("LD_PRELOAD");
  command.set_env.emplace_back("HANGWATCH_DISABLE", "1");
  for (const auto& kv : set_env) command.set_env.push_back(kv);
  // The launcher's SIGTERM reaches the collector and its debugger too (Slurm signals every
  // process of the step): they finish within their own bounds while this rank holds its own.
  command.hold_term = true;
  Expected<ChildProcess> child = ChildProcess::start(command);
  if (!child) return Error{child.error()};
  if (traces) CollectorLauncher::allowTracer(child->pid());
  const auto deadline = ChildProcess::Clock::now() + std::chrono::duration_cast<ChildProcess::Clock::duration>(
                                                          std::chrono::duration<double>(wait_s));
  CollectorOutcome out;
  out.pid = child->pid();
  if (std::optional<int> code = child->waitUntil(deadline, give_up)) {
    out.finished = true;
    out.exit_code = *code;
  }
  return out;
}

}  // namespace

Expected<CollectorOutcome> CollectorLauncher::run(const CollectorRequest& r) {
  if (r.binary.empty()) return Error{"no forensics binary found (set HANGWATCH_FORENSICS)"};
  // The collector ptrace-attaches to us from a child process: under Yama's ptrace_scope 1,
  // allowed for our descendants until it exists, then for it alone (allowTracer).
  allowTracer(::getpid());
  std::vector<std::string> args = {"collect", "--pid", fmt::format("{}", r.pid), "--out", r.job_dir, "--backend", "auto"};
  if (const double bound = debuggerBoundFor(r.wait_s); bound < kDebuggerBoundS) {
    args.push_back("--timeout-debugger");
    args.push_back(fmt::format("{:g}", bound));
  }
  if (r.rank >= 0) {
    args.push_back("--rank");
    args.push_back(fmt::format("{}", r.rank));
    if (r.mark_state) args.push_back("--state");
    if (r.mark_state && !r.node_ranks.empty()) {
      args.push_back("--node");
      args.push_back(r.node_ranks);
    }
  }
  if (!r.ask_ras) args.push_back("--no-ras");
  std::vector<std::pair<std::string, std::string>> env;
  if (!r.debugger.empty()) env.emplace_back("HANGWATCH_DEBUGGER", r.debugger);
  return runForensics(true, r.binary, std::move(args), r.log_path, r.wait_s, env, r.give_up);
}

Expected<CollectorOutcome> CollectorLauncher::askRas(const RasRequest& r) {
  if (r.binary.empty()) return Error{"no forensics binary found (set HANGWATCH_FORENSICS)"};
  std::vector<std::string> args = {"ras",   "--pid", fmt::format("{}", r.pid), "--rank", fmt::format("{}", r.rank),
                                   "--out", r.job_dir, "--bound", fmt::format("{:g}", r.bound_s)};
  return runForensics(false, r.binary, std::move(args), r.log_path, r.bound_s + 5, {}, r.give_up);
}

}  // namespace hangwatch::watchdog
