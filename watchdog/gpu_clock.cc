#include "hangwatch/watchdog/gpu_clock.h"

namespace hangwatch::watchdog {

void GpuClock::calibrate(cudaEvent_t ref, cudaStream_t idle_stream, int64_t host_ns) {
  if (api_.record(ref, idle_stream) != cudaSuccess) return;
  pending_ = ref;
  pending_host_ns_ = host_ns;
}

cudaEvent_t GpuClock::poll() {
  if (pending_ == nullptr || api_.query(pending_) != cudaSuccess) return nullptr;
  cudaEvent_t old = current_;
  current_ = pending_;
  current_host_ns_ = pending_host_ns_;
  pending_ = nullptr;
  return old;
}

std::optional<int64_t> GpuClock::hostNs(cudaEvent_t completed_event) {
  if (current_ == nullptr) return std::nullopt;
  float ms = 0;
  if (api_.elapsedMs(&ms, current_, completed_event) != cudaSuccess) return std::nullopt;
  return current_host_ns_ + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
}

}  // namespace hangwatch::watchdog
