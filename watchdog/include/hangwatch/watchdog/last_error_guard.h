#pragma once
// The watchdog's own CUDA calls on a user's thread (event records, event creation,
// device queries) must not change what that thread's cudaGetLastError reports. A
// failure of ours is cleared again when the thread had no error pending; when it had
// one, CUDA offers no way to restore it, and ours (usually the same sticky code) stays.
#include <cuda_runtime_api.h>

#include "hangwatch/watchdog/real_api.h"

namespace hangwatch::watchdog {

class LastErrorGuard {
 public:
  LastErrorGuard() {
    if (auto peek = RealApi::instance().peekAtLastError.get()) before_ = peek();
  }
  ~LastErrorGuard() {
    if (before_ != cudaSuccess) return;
    auto peek = RealApi::instance().peekAtLastError.get();
    if (peek && peek() != cudaSuccess) {
      if (auto take = RealApi::instance().getLastError.get()) take();
    }
  }
  LastErrorGuard(const LastErrorGuard&) = delete;
  LastErrorGuard& operator=(const LastErrorGuard&) = delete;

 private:
  cudaError_t before_ = cudaErrorUnknown;  // unknown: leave the state alone
};

}  // namespace hangwatch::watchdog
