#pragma once
// A child process for the pystacks tests: started with a stdout pipe, waited
// for until it prints a ready token, stopped with SIGSTOP, and always killed
// (SIGCONT + SIGKILL + reaped) when the test ends, pass or fail.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace pystacks_test {

class TargetProcess {
 public:
  explicit TargetProcess(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    out_fd_ = fds[0];
  }
  ~TargetProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGCONT);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;

  pid_t pid() const { return pid_; }

  // True once stdout carried `token` within `timeout`.
  bool waitFor(const std::string& token, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (output_.find(token) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[512];
      const ssize_t n = read(out_fd_, buf, sizeof(buf));
      if (n <= 0) return false;
      output_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  // SIGSTOP and wait until every thread of the process is stopped.
  bool stop() {
    if (kill(pid_, SIGSTOP) != 0) return false;
    for (int i = 0; i < 500; ++i) {
      std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
      std::string line;
      std::getline(stat, line);
      const auto close_paren = line.rfind(')');
      if (close_paren != std::string::npos && close_paren + 2 < line.size() && line[close_paren + 2] == 'T') return true;
      usleep(2000);
    }
    return false;
  }
  void resume() { kill(pid_, SIGCONT); }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string output_;
};

// Line numbers of "# MARK:<name>" comments in a script, so tests never hard-code them.
inline int markedLine(const std::string& script, const std::string& mark) {
  std::ifstream in(script);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find("# MARK:" + mark) != std::string::npos) return n;
  return -1;
}

// Installed interpreters of one minor version: pyenv builds and the system's.
inline std::vector<std::string> interpretersFor(int minor) {
  std::vector<std::string> found;
  const std::string exe = "python3." + std::to_string(minor);
  std::vector<std::string> roots;
  if (const char* root = std::getenv("PYENV_ROOT")) roots.push_back(root);
  roots.push_back("/root/.pyenv");
  for (const auto& root : roots) {
    const std::string versions = root + "/versions";
    std::vector<std::string> candidates;
    if (auto* dir = opendir(versions.c_str())) {
      while (auto* e = readdir(dir)) {
        const std::string name = e->d_name;
        if (name.rfind("3." + std::to_string(minor) + ".", 0) == 0) candidates.push_back(versions + "/" + name + "/bin/" + exe);
      }
      closedir(dir);
    }
    for (const auto& c : candidates)
      if (access(c.c_str(), X_OK) == 0 && std::find(found.begin(), found.end(), c) == found.end()) found.push_back(c);
  }
  const std::string system = "/usr/bin/" + exe;
  if (access(system.c_str(), X_OK) == 0) found.push_back(system);
  return found;
}

// stdout of a shell command (test set-up only: compilers, interpreters).
inline std::string runAndCapture(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

}  // namespace pystacks_test
