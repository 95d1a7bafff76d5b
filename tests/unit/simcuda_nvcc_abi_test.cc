// nvcc's registration and launch ABI, called as the code nvcc generates calls it
// (crt/host_runtime.h): a module constructor registers the fat binary, its functions and
// variables; <<<>>> pushes a call configuration the host stub pops before
// __cudaLaunchKernel. A registered device function runs as opaque device work.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>

#include "hangwatch/simgpu/kernel.h"
#include "hangwatch/simgpu/runtime.h"

extern "C" {
void** __cudaRegisterFatBinary(void*);
void __cudaRegisterFatBinaryEnd(void**);
void __cudaUnregisterFatBinary(void**);
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*);
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int);
void __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int);
unsigned __cudaPushCallConfiguration(dim3, dim3, size_t, struct CUstream_st*);
cudaError_t __cudaPopCallConfiguration(dim3*, dim3*, size_t*, void*);
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*);
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
}

namespace {

// A host stub as nvcc emits one: launching it must never run its body on simgpu.
int stub_calls = 0;
void scaleStub(float*, int) { ++stub_calls; }

int device_counter = 0;  // the host shadow of a __device__ int

char fake_fatbin[16];

int ran = 0;
void addToRan(int add) { ran += add; }

struct Module {
  void** handle = __cudaRegisterFatBinary(fake_fatbin);
  Module() {
    __cudaRegisterFunction(handle, reinterpret_cast<const char*>(&scaleStub), const_cast<char*>("_Z5scalePfi"),
                           "_Z5scalePfi", -1, nullptr, nullptr, nullptr, nullptr, nullptr);
    __cudaRegisterVar(handle, reinterpret_cast<char*>(&device_counter), const_cast<char*>("counter"), "counter", 0,
                      sizeof(int), 0, 0);
    __cudaRegisterFatBinaryEnd(handle);
  }
};
Module& module() {
  static Module m;
  return m;
}
const void* scaleFunction() {
  module();
  return reinterpret_cast<const void*>(&scaleStub);
}

float eventMs(cudaEvent_t a, cudaEvent_t b) {
  float ms = -1;
  REQUIRE(cudaEventElapsedTime(&ms, a, b) == cudaSuccess);
  return ms;
}

}  // namespace

TEST_CASE("PushedCallConfigurationIsPoppedOnceAndInLastInFirstOutOrder") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  REQUIRE(__cudaPushCallConfiguration(dim3(4), dim3(128), 256, s) == 0);
  REQUIRE(__cudaPushCallConfiguration(dim3(7, 2), dim3(32), 0, nullptr) == 0);
  dim3 grid, block;
  size_t shared = 1;
  cudaStream_t popped = s;
  REQUIRE(__cudaPopCallConfiguration(&grid, &block, &shared, &popped) == cudaSuccess);
  CHECK((grid.x == 7 && grid.y == 2 && block.x == 32 && shared == 0 && popped == nullptr));
  REQUIRE(__cudaPopCallConfiguration(&grid, &block, &shared, &popped) == cudaSuccess);
  CHECK((grid.x == 4 && block.x == 128 && shared == 256 && popped == s));
  CHECK(__cudaPopCallConfiguration(&grid, &block, &shared, &popped) == cudaErrorMissingConfiguration);
}

TEST_CASE("RegisteredDeviceFunctionRunsAsOpaqueWorkNamedByItsDeviceName") {
  cudaKernel_t k = nullptr;
  REQUIRE(__cudaGetKernel(&k, scaleFunction()) == cudaSuccess);
  cudaStream_t s;
  cudaEvent_t before, after;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  REQUIRE(cudaEventCreate(&before) == cudaSuccess);
  REQUIRE(cudaEventCreate(&after) == cudaSuccess);
  float* x = nullptr;
  int n = 1 << 20;
  void* args[] = {&x, &n};
  REQUIRE(cudaEventRecord(before, s) == cudaSuccess);
  // 4096 blocks of 256 threads: 8 per SM, 1056 a wave, 4 waves: 2 us + 4 x 1 us.
  REQUIRE(__cudaLaunchKernel(k, dim3(4096), dim3(256), args, 0, s) == cudaSuccess);
  REQUIRE(cudaEventRecord(after, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(stub_calls == 0);
  CHECK(eventMs(before, after) >= 0.006f);
  const char* name = nullptr;
  REQUIRE(cudaFuncGetName(&name, scaleFunction()) == cudaSuccess);
  CHECK(std::string(name) == "_Z5scalePfi");
  CHECK(cudaLaunchKernel(scaleFunction(), dim3(1), dim3(2048), args, 0, s) == cudaErrorInvalidConfiguration);
}

TEST_CASE("OpaqueFunctionAnswersAttributeAndOccupancyQueries") {
  cudaFuncAttributes attr{};
  REQUIRE(cudaFuncGetAttributes(&attr, scaleFunction()) == cudaSuccess);
  CHECK(attr.maxThreadsPerBlock == 1024);
  CHECK(attr.binaryVersion == 90);
  CHECK(attr.maxDynamicSharedSizeBytes == 48 * 1024);
  int blocks = 0;
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scaleFunction(), 256, 0) == cudaSuccess);
  CHECK(blocks == 8);  // 2048 threads an SM
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scaleFunction(), 64, 0) == cudaSuccess);
  CHECK(blocks == 32);  // 32 blocks an SM
  REQUIRE(cudaFuncSetAttribute(scaleFunction(), cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024) ==
          cudaSuccess);
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scaleFunction(), 64, 100 * 1024) == cudaSuccess);
  CHECK(blocks == 2);  // 228 KB an SM, 1 KB reserved a block
  CHECK(cudaFuncSetAttribute(scaleFunction(), cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024) ==
        cudaErrorInvalidValue);
  int unregistered = 0;
  CHECK(cudaFuncGetAttributes(&attr, &unregistered) == cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
}

TEST_CASE("SimKernelsKeepRunningTheirHostBodies") {
  const void* k = simgpu::kernel<&addToRan>("addToRan");
  int add = 3;
  void* args[] = {&add};
  REQUIRE(cudaLaunchKernel(k, dim3(1), dim3(1), args, 0, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(ran == 3);
}

TEST_CASE("RegisteredDeviceVariableIsReachedThroughItsSymbol") {
  module();
  int value = 41;
  REQUIRE(cudaMemcpyToSymbol(&device_counter, &value, sizeof(int), 0, cudaMemcpyHostToDevice) == cudaSuccess);
  int back = 0;
  REQUIRE(cudaMemcpyFromSymbol(&back, &device_counter, sizeof(int), 0, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == 41);
  size_t size = 0;
  REQUIRE(cudaGetSymbolSize(&size, &device_counter) == cudaSuccess);
  CHECK(size == sizeof(int));
  CHECK(cudaMemcpyToSymbol(&device_counter, &value, sizeof(int), 2, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyToSymbol(&value, &value, sizeof(int), 0, cudaMemcpyHostToDevice) == cudaErrorInvalidSymbol);
  cudaGetLastError();
}

TEST_CASE("UnregisteredModuleFunctionsCanNoLongerBeLaunched") {
  static int stub_b_calls = 0;
  struct Stub {
    static void run() { ++stub_b_calls; }
  };
  void** handle = __cudaRegisterFatBinary(fake_fatbin);
  __cudaRegisterFunction(handle, reinterpret_cast<const char*>(&Stub::run), const_cast<char*>("_Z3runv"), "_Z3runv",
                         -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(handle);
  REQUIRE(cudaLaunchKernel(reinterpret_cast<const void*>(&Stub::run), dim3(1), dim3(1), nullptr, 0, nullptr) ==
          cudaSuccess);
  __cudaUnregisterFatBinary(handle);
  CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&Stub::run), dim3(1), dim3(1), nullptr, 0, nullptr) ==
        cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
  CHECK(stub_b_calls == 0);
}

TEST_CASE("ManagedVariableGetsZeroedManagedStorageNamedByItself") {
  // nvcc turns `__managed__ int m;` into a host pointer the runtime sets; host code uses *m.
  static int* managed = nullptr;
  void** handle = __cudaRegisterFatBinary(fake_fatbin);
  __cudaRegisterManagedVar(handle, reinterpret_cast<void**>(&managed), const_cast<char*>("m"), "m", 0, sizeof(int), 0,
                           0);
  __cudaRegisterFatBinaryEnd(handle);
  REQUIRE(managed != nullptr);
  CHECK(*managed == 0);
  void* address = nullptr;
  REQUIRE(cudaGetSymbolAddress(&address, managed) == cudaSuccess);
  CHECK(address == managed);
  cudaPointerAttributes attr;
  REQUIRE(cudaPointerGetAttributes(&attr, managed) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeManaged);
  __cudaUnregisterFatBinary(handle);
  CHECK(cudaGetSymbolAddress(&address, managed) == cudaErrorInvalidSymbol);
  cudaGetLastError();
}
