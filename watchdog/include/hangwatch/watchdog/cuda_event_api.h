#pragma once
// EventApi over the real (next) CUDA runtime: simgpu or libcudart.
#include "hangwatch/watchdog/event_api.h"

namespace hangwatch::watchdog {

class CudaEventApi : public EventApi {
 public:
  cudaError_t create(cudaEvent_t* event) override;
  cudaError_t destroy(cudaEvent_t event) override;
  cudaError_t record(cudaEvent_t event, cudaStream_t stream) override;
  cudaError_t query(cudaEvent_t event) override;
  cudaError_t elapsedMs(float* ms, cudaEvent_t start, cudaEvent_t end) override;
};

}  // namespace hangwatch::watchdog
