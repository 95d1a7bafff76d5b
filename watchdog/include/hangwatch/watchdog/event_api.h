#pragma once
// The event calls the timing path needs, behind an interface so the pool, the
// poller and the clock mapping can be tested with fake events and fake time.
#include <cuda_runtime_api.h>

namespace hangwatch::watchdog {

class EventApi {
 public:
  virtual ~EventApi() = default;
  virtual cudaError_t create(cudaEvent_t* event) = 0;
  virtual cudaError_t destroy(cudaEvent_t event) = 0;
  virtual cudaError_t record(cudaEvent_t event, cudaStream_t stream) = 0;
  // cudaSuccess when done, cudaErrorNotReady while pending; never blocks.
  virtual cudaError_t query(cudaEvent_t event) = 0;
  virtual cudaError_t elapsedMs(float* ms, cudaEvent_t start, cudaEvent_t end) = 0;
};

}  // namespace hangwatch::watchdog
