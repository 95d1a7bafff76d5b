#include "hangwatch/common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <linux/close_range.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <cerrno>
#include <thread>

#include <fmt/format.h>

namespace bp = boost::process;

namespace hangwatch {
namespace {

bp::environment environmentFor(const ChildCommand& c) {
  bp::environment env = boost::this_process::environment();
  for (const std::string& name : c.unset_env) env.erase(name);
  for (const auto& [name, value] : c.set_env) env[name] = value;
  return env;
}

// In the child before exec. A session of its own: Boost.Process returns only once the exec
// happened, so the session exists by the time anyone may kill it. Every fd above stdio
// close-on-exec: the watchdog starts the collector from inside the user's job, whose
// sockets and files (a listening port, a lock) must not stay open in a collector that
// outlives it. Boost's own exec-error pipe is close-on-exec already.
auto ownSessionNoInheritedFds() {
  return bp::extend::on_exec_setup = [](auto&) {
    ::setsid();
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  };
}

}  // namespace

Expected<ChildProcess> ChildProcess::start(const ChildCommand& c) {
  std::error_code ec;
  std::unique_ptr<bp::child> child;
  ScopedFd output;
  if (c.output_path.empty()) {
    bp::pipe pipe;
    child = std::make_unique<bp::child>(bp::exe = c.exe, bp::args = c.args, environmentFor(c), bp::std_in < bp::null,
                                        (bp::std_out & bp::std_err) > pipe, ownSessionNoInheritedFds(), ec);
    output = ScopedFd(pipe.native_source());
    pipe.assign_source(-1);
    if (output.valid()) ::fcntl(output.get(), F_SETFD, FD_CLOEXEC);
  } else {
    child = std::make_unique<bp::child>(bp::exe = c.exe, bp::args = c.args, environmentFor(c), bp::std_in < bp::null,
                                        (bp::std_out & bp::std_err) > c.output_path, ownSessionNoInheritedFds(), ec);
  }
  if (ec) return Error{fmt::format("cannot start {}: {}", c.exe, ec.message())};
  return ChildProcess(std::move(child), std::move(output));
}

ChildProcess::ChildProcess(std::unique_ptr<bp::child> child, ScopedFd output)
    : child_(std::move(child)), output_(std::move(output)), pid_(child_->id()) {}

ChildProcess::~ChildProcess() {
  if (child_) child_->detach();
}

ChildProcess::ChildProcess(ChildProcess&&) noexcept = default;

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (child_) child_->detach();
    child_ = std::move(other.child_);
    output_ = std::move(other.output_);
    pid_ = other.pid_;
  }
  return *this;
}

bool ChildProcess::readOutput(Clock::time_point deadline, std::string& out, size_t limit) {
  while (output_.valid()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{output_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(output_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 2 * limit) out.erase(0, out.size() - limit);
  }
  output_.close();
  if (out.size() > limit) out.erase(0, out.size() - limit);
  return true;
}

std::optional<int> ChildProcess::waitUntil(Clock::time_point deadline, const std::function<bool()>& give_up) {
  std::error_code ec;
  while (child_->running(ec) && Clock::now() < deadline && !(give_up && give_up()))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (child_->running(ec)) return std::nullopt;
  return child_->exit_code();
}

void ChildProcess::killSession() { ::kill(-pid_, SIGKILL); }

}  // namespace hangwatch
