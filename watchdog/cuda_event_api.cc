#include "hangwatch/watchdog/cuda_event_api.h"

#include "hangwatch/watchdog/real_api.h"

namespace hangwatch::watchdog {

cudaError_t CudaEventApi::create(cudaEvent_t* event) {
  auto fn = RealApi::instance().eventCreateWithFlags.get();
  return fn ? fn(event, cudaEventDefault) : cudaErrorNotSupported;
}

cudaError_t CudaEventApi::destroy(cudaEvent_t event) {
  auto fn = RealApi::instance().eventDestroy.get();
  return fn ? fn(event) : cudaErrorNotSupported;
}

cudaError_t CudaEventApi::record(cudaEvent_t event, cudaStream_t stream) {
  auto fn = RealApi::instance().eventRecord.get();
  return fn ? fn(event, stream) : cudaErrorNotSupported;
}

cudaError_t CudaEventApi::query(cudaEvent_t event) {
  auto fn = RealApi::instance().eventQuery.get();
  return fn ? fn(event) : cudaErrorNotSupported;
}

cudaError_t CudaEventApi::elapsedMs(float* ms, cudaEvent_t start, cudaEvent_t end) {
  auto fn = RealApi::instance().eventElapsedTime.get();
  return fn ? fn(ms, start, end) : cudaErrorNotSupported;
}

}  // namespace hangwatch::watchdog
