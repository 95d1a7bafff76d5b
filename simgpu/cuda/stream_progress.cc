#include "hangwatch/simgpu/cuda/stream_progress.h"

#include <algorithm>

namespace simgpu {

void StreamProgress::advance(std::chrono::steady_clock::time_point model_end) {
  {
    std::lock_guard lock(mutex_);
    ++completed_;
    model_end_ = std::max(model_end_, model_end);
  }
  changed_.notify_all();
}

bool StreamProgress::reached(uint64_t seq) {
  std::lock_guard lock(mutex_);
  return completed_ >= seq;
}

void StreamProgress::waitFor(uint64_t seq) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return completed_ >= seq; });
}

std::chrono::steady_clock::time_point StreamProgress::modelEnd() {
  std::lock_guard lock(mutex_);
  return model_end_;
}

}  // namespace simgpu
