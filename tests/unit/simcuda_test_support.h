#pragma once
// Shared by the simgpu unit tests: sim kernels and a way to run one test case in a
// fresh process whose environment is set before simgpu reads it (RANK, SIMGPU_*).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace simgpu_test {

inline double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// True inside the re-executed child started by runTestInChild.
inline bool inChild() { return std::getenv("SIMGPU_TEST_CHILD") != nullptr; }

// Re-executes this test binary running only `test_name`, with `env` added; returns its exit status.
inline int runTestInChild(const char* test_name, const std::vector<std::pair<std::string, std::string>>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    setenv("SIMGPU_TEST_CHILD", "1", 1);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) _exit(97);
    exe[n] = '\0';
    execl(exe, exe, test_name, static_cast<char*>(nullptr));
    _exit(98);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace simgpu_test
