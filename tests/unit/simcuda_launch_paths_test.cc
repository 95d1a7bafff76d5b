// The entry points real CUDA 12/13 programs launch through, beyond cudaLaunchKernel:
// nvcc's __cudaLaunchKernel, the per-thread-default-stream (_ptsz/_ptds) flavours,
// driver launches reached through cudaGetDriverEntryPoint, and the device an event
// belongs to. Semantics as cuda_runtime_api.h / cuda.h document them.
#include <catch2/catch.hpp>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <thread>

// cudaGetDriverEntryPoint is deprecated but still what many programs call.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "simcuda_test_support.h"
#include "hangwatch/simgpu/kernel.h"
#include "hangwatch/simgpu/runtime.h"

extern "C" {
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*);
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaStreamGetId_ptsz(cudaStream_t, unsigned long long*);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
}

namespace {

void addIntTo(int value, int* out) { *out += value; }
const void* addIntKernel() { return simgpu::kernel<&addIntTo>("addTo"); }

void spin(int ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}
const void* spinKernel() { return simgpu::kernel<&spin>("spin"); }

using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**);

}  // namespace

TEST_CASE("NvccLaunchPathRunsTheKernelOnTheGivenStream") {
  cudaKernel_t k = nullptr;
  REQUIRE(__cudaGetKernel(&k, addIntKernel()) == cudaSuccess);
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  int value = 5, sum = 0;
  int* out = &sum;
  void* args[] = {&value, &out};
  REQUIRE(__cudaLaunchKernel(k, dim3(1), dim3(1), args, 0, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(sum == 5);
  const char* name = nullptr;
  REQUIRE(cudaFuncGetName(&name, reinterpret_cast<const void*>(k)) == cudaSuccess);
  CHECK(std::string(name) == "addTo");
  CHECK(__cudaGetKernel(&k, reinterpret_cast<const void*>(&spin)) == cudaErrorInvalidDeviceFunction);
  CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction);
  cudaStreamDestroy(s);
}

TEST_CASE("PerThreadEntryPointsTakeStreamZeroAsTheThreadsStream") {
  unsigned long long legacy = 0, per_thread = 0, ptsz_zero = 0;
  REQUIRE(cudaStreamGetId(nullptr, &legacy) == cudaSuccess);
  REQUIRE(cudaStreamGetId(cudaStreamPerThread, &per_thread) == cudaSuccess);
  REQUIRE(cudaStreamGetId_ptsz(nullptr, &ptsz_zero) == cudaSuccess);
  CHECK(ptsz_zero == per_thread);
  CHECK(ptsz_zero != legacy);
  REQUIRE(cudaStreamGetId_ptsz(cudaStreamLegacy, &ptsz_zero) == cudaSuccess);
  CHECK(ptsz_zero == legacy);

  // A long kernel on the thread's stream leaves the legacy stream of a non-blocking
  // stream's view alone but is what cudaStreamSynchronize_ptsz(0) waits for.
  int ms = 60;
  void* spin_args[] = {&ms};
  REQUIRE(cudaLaunchKernel_ptsz(spinKernel(), dim3(1), dim3(1), spin_args, 0, nullptr) == cudaSuccess);
  CHECK(cudaStreamQuery(cudaStreamPerThread) == cudaErrorNotReady);
  int value = 3, sum = 0;
  int* out = &sum;
  void* args[] = {&value, &out};
  cudaKernel_t k = nullptr;
  REQUIRE(__cudaGetKernel(&k, addIntKernel()) == cudaSuccess);
  REQUIRE(__cudaLaunchKernel_ptsz(k, dim3(1), dim3(1), args, 0, nullptr) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize_ptsz(nullptr) == cudaSuccess);
  CHECK(cudaStreamQuery(cudaStreamPerThread) == cudaSuccess);
  CHECK(sum == 3);
}

TEST_CASE("DriverLaunchThroughTheEntryPointRunsTheKernelWithoutTouchingTheRuntimesLastError") {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  REQUIRE(cudaGetDriverEntryPoint("cuLaunchKernel", &fn, cudaEnableDefault, &status) == cudaSuccess);
  REQUIRE(fn != nullptr);
  CHECK(status == cudaDriverEntryPointSuccess);
  auto launch = reinterpret_cast<LaunchKernelFn>(fn);
  cudaFunction_t f = nullptr;
  REQUIRE(cudaGetFuncBySymbol(&f, addIntKernel()) == cudaSuccess);
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  int value = 4, sum = 0;
  int* out = &sum;
  void* args[] = {&value, &out};
  REQUIRE(launch(reinterpret_cast<CUfunction>(f), 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(s), args,
                 nullptr) == CUDA_SUCCESS);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(sum == 4);
  CHECK(launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(launch(reinterpret_cast<CUfunction>(f), 0, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(cudaPeekAtLastError() == cudaSuccess);

  // The _ptsz query hands out the per-thread flavour, which takes 0 as the thread's stream.
  REQUIRE(cudaGetDriverEntryPoint_ptsz("cuLaunchKernel", &fn, cudaEnableDefault, &status) == cudaSuccess);
  REQUIRE(reinterpret_cast<LaunchKernelFn>(fn)(reinterpret_cast<CUfunction>(f), 1, 1, 1, 1, 1, 1, 0, nullptr, args,
                                               nullptr) == CUDA_SUCCESS);
  REQUIRE(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess);
  CHECK(sum == 8);

  using NameFn = CUresult (*)(const char**, CUfunction);
  REQUIRE(cudaGetDriverEntryPointByVersion("cuFuncGetName", &fn, 12030, cudaEnableDefault, &status) == cudaSuccess);
  REQUIRE(fn != nullptr);
  const char* name = nullptr;
  REQUIRE(reinterpret_cast<NameFn>(fn)(&name, reinterpret_cast<CUfunction>(f)) == CUDA_SUCCESS);
  CHECK(std::string(name) == "addTo");

  REQUIRE(cudaGetDriverEntryPoint("cuNoSuchFunction", &fn, cudaEnableDefault, &status) == cudaSuccess);
  CHECK(fn == nullptr);
  CHECK(status == cudaDriverEntryPointSymbolNotFound);
  CHECK(cudaGetDriverEntryPoint("cuLaunchKernel", &fn, 0x80, &status) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST_CASE("EventRecordedOnAnotherDevicesStreamIsAnInvalidResourceHandle") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudaEvent_t on0, other0;
  REQUIRE(cudaEventCreate(&on0) == cudaSuccess);
  REQUIRE(cudaEventCreate(&other0) == cudaSuccess);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  cudaStream_t s1;
  cudaEvent_t on1;
  REQUIRE(cudaStreamCreate(&s1) == cudaSuccess);
  REQUIRE(cudaEventCreate(&on1) == cudaSuccess);
  CHECK(cudaEventRecord(on0, s1) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventRecord(on1, s1) == cudaSuccess);
  CHECK(cudaEventRecord(on1, nullptr) == cudaSuccess);  // device 1's legacy stream
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(cudaEventRecord(on1, nullptr) == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventRecord(on0, nullptr) == cudaSuccess);
  // A stream may wait on another device's event (cudaStreamWaitEvent's documentation).
  CHECK(cudaStreamWaitEvent(s1, on0, 0) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, on0, on1) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  cudaStreamDestroy(s1);
}

TEST_CASE("SlowRankStretchesAKernelsWholeDuration") {
  if (!simgpu_test::inChild()) {
    CHECK(simgpu_test::runTestInChild("SlowRankStretchesAKernelsWholeDuration",
                                      {{"SIMGPU_FAULTS", "slow-rank=1:0.5"}, {"RANK", "1"}}) == 0);
    return;
  }
  // The kernel's host function spends 40 ms; at half speed the device takes at least 80.
  cudaEvent_t a, b;
  REQUIRE(cudaEventCreate(&a) == cudaSuccess);
  REQUIRE(cudaEventCreate(&b) == cudaSuccess);
  int ms = 40;
  void* args[] = {&ms};
  REQUIRE(cudaEventRecord(a, nullptr) == cudaSuccess);
  REQUIRE(cudaLaunchKernel(spinKernel(), dim3(1), dim3(1), args, 0, nullptr) == cudaSuccess);
  REQUIRE(cudaEventRecord(b, nullptr) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(b) == cudaSuccess);
  float elapsed = 0;
  REQUIRE(cudaEventElapsedTime(&elapsed, a, b) == cudaSuccess);
  CHECK(elapsed >= 79.0f);
}
