// How long readPythonStacks takes on a stopped 2-thread and 10-thread Python
// process, next to `eu-stack -p` on the same process (the collector's budget is
// 2x eu-stack for native + Python stacks). Interpreter: $PYSTACKS_BENCH_PYTHON,
// else the first of python3.12/3.11/3.13/3.10 on PATH.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <cstdlib>
#include <string>

#include "hangwatch/forensics/python/python_stacks.h"

namespace {

class StoppedPythonTarget {
 public:
  explicit StoppedPythonTarget(int extra_threads) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      const std::string python = interpreter();
      const std::string script = std::string(PYSTACKS_TARGETS_DIR) + "/blocked_threads.py";
      const std::string extra = std::to_string(extra_threads);
      execlp(python.c_str(), python.c_str(), script.c_str(), extra.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[256];
    pollfd p{fds[0], POLLIN, 0};
    while (out.find("ready") == std::string::npos && poll(&p, 1, 20000) > 0) {
      const ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    close(fds[0]);
    usleep(200 * 1000);
    kill(pid_, SIGSTOP);
    usleep(50 * 1000);
  }
  ~StoppedPythonTarget() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

  static std::string interpreter() {
    if (const char* env = std::getenv("PYSTACKS_BENCH_PYTHON")) return env;
    for (const char* name : {"python3.12", "python3.11", "python3.13", "python3.10"})
      if (std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0) return name;
    return "python3";
  }

 private:
  pid_t pid_ = -1;
};

void BM_ReadPythonStacks(benchmark::State& state) {
  StoppedPythonTarget target(static_cast<int>(state.range(0)) - 2);
  size_t threads = 0;
  for (auto _ : state) {
    auto stacks = hangwatch::forensics::readPythonStacks(target.pid());
    if (!stacks || !*stacks) {
      // SkipWithError keeps the pointer: the message must outlive this scope.
      static std::string why;
      why = stacks ? "no CPython in target" : stacks.error();
      state.SkipWithError(why.c_str());
      return;
    }
    threads = (*stacks)->threads.size();
    benchmark::DoNotOptimize(threads);
  }
  state.counters["python_threads"] = static_cast<double>(threads);
}
BENCHMARK(BM_ReadPythonStacks)->Arg(2)->Arg(10)->Unit(benchmark::kMillisecond);

void BM_EuStack(benchmark::State& state) {
  StoppedPythonTarget target(static_cast<int>(state.range(0)) - 2);
  const std::string command = "eu-stack -p " + std::to_string(target.pid()) + " >/dev/null 2>&1";
  for (auto _ : state) {
    if (std::system(command.c_str()) != 0) {
      state.SkipWithError("eu-stack failed");
      return;
    }
  }
}
BENCHMARK(BM_EuStack)->Arg(2)->Arg(10)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
