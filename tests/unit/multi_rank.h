#pragma once
// Runs one function per rank in forked processes, as mpirun would, with a shared
// board for progress reports and an abort request. The parent never touches the
// CUDA/NCCL state, so children start from a clean runtime.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nccl.h>

namespace testing {

struct RankBoard {
  std::atomic<int> progress[64];  // per rank: what the test body reports
  std::atomic<int> abort_requested;
};

struct RankResults {
  std::vector<int> exit_codes;  // -1: killed at the deadline
  bool timed_out = false;
};

class MultiRankJob {
 public:
  explicit MultiRankJob(int nranks) : nranks_(nranks) {
    void* p = mmap(nullptr, sizeof(RankBoard), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    board_ = new (p) RankBoard();
    ncclGetUniqueId(&id_);
  }
  ~MultiRankJob() {
    killAll();
    munmap(board_, sizeof(RankBoard));
  }

  RankBoard& board() { return *board_; }
  const ncclUniqueId& id() const { return id_; }

  // body(rank) returns the child's exit code; env is applied in the child first.
  void start(const std::function<int(int)>& body, const std::map<std::string, std::string>& env = {}) {
    for (int r = 0; r < nranks_; ++r) {
      pid_t pid = fork();
      if (pid == 0) {
        for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
        _exit(body(r));
      }
      pids_.push_back(pid);
    }
  }

  // Waits for every child, killing the rest at the deadline.
  RankResults wait(std::chrono::seconds deadline = std::chrono::seconds(60)) {
    RankResults res;
    res.exit_codes.assign(pids_.size(), -1);
    auto end = std::chrono::steady_clock::now() + deadline;
    size_t left = pids_.size();
    while (left > 0) {
      for (size_t i = 0; i < pids_.size(); ++i) {
        if (pids_[i] <= 0) continue;
        int status = 0;
        if (waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
          res.exit_codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          pids_[i] = 0;
          --left;
        }
      }
      if (left == 0) break;
      if (std::chrono::steady_clock::now() > end) {
        res.timed_out = true;
        killAll();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return res;
  }

  // Waits until the progress values stop changing for `quiet` (a hang), or `deadline`.
  std::vector<int> waitForStall(std::chrono::milliseconds quiet, std::chrono::seconds deadline) {
    auto end = std::chrono::steady_clock::now() + deadline;
    std::vector<int> last = snapshot();
    auto since = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::vector<int> now = snapshot();
      if (now != last) {
        last = now;
        since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - since >= quiet) {
        break;
      }
    }
    return last;
  }

  std::vector<int> snapshot() const {
    std::vector<int> v;
    for (int r = 0; r < nranks_; ++r) v.push_back(board_->progress[r].load());
    return v;
  }

 private:
  void killAll() {
    for (pid_t& p : pids_)
      if (p > 0) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        p = 0;
      }
  }

  int nranks_;
  RankBoard* board_;
  ncclUniqueId id_{};
  std::vector<pid_t> pids_;
};

inline bool allZero(const RankResults& r) {
  if (r.timed_out) return false;
  for (int c : r.exit_codes)
    if (c != 0) return false;
  return true;
}

}  // namespace testing
