#include "hangwatch/simgpu/cuda/stream_progress.h"

namespace simgpu {

void StreamProgress::advance() {
  {
    std::lock_guard lock(mutex_);
    ++completed_;
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

}  // namespace simgpu
