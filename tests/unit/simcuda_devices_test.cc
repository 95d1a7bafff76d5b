// The runtime calls multi-device NCCL programs make besides launches: peer access and
// peer copies, pinned host memory mapped for the device, PCI bus ids, host functions
// and callbacks on a stream. Semantics and error codes as cuda_runtime_api.h documents.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <string>

TEST_CASE("PeerAccessBetweenDevicesFollowsTheRuntimesRules") {
  int can = -1;
  REQUIRE(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess);
  CHECK(can == 1);
  REQUIRE(cudaDeviceCanAccessPeer(&can, 2, 2) == cudaSuccess);
  CHECK(can == 0);
  CHECK(cudaDeviceCanAccessPeer(&can, 0, 99) == cudaErrorInvalidDevice);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess);
  CHECK(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled);
  CHECK(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorInvalidDevice);
  CHECK(cudaDeviceEnablePeerAccess(2, 1) == cudaErrorInvalidValue);
  CHECK(cudaDeviceDisablePeerAccess(1) == cudaSuccess);
  CHECK(cudaDeviceDisablePeerAccess(1) == cudaErrorPeerAccessNotEnabled);
  CHECK(cudaGetLastError() == cudaErrorPeerAccessNotEnabled);
  CHECK(std::string(cudaGetErrorName(cudaErrorPeerAccessNotEnabled)) == "cudaErrorPeerAccessNotEnabled");
}

TEST_CASE("PeerCopiesMoveBytesBetweenDevices") {
  float *a = nullptr, *b = nullptr;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&a), 64 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&b), 64 * sizeof(float)) == cudaSuccess);
  for (int i = 0; i < 64; ++i) a[i] = static_cast<float>(i);
  REQUIRE(cudaMemcpyPeer(b, 1, a, 0, 64 * sizeof(float)) == cudaSuccess);
  CHECK(b[63] == 63.0f);
  a[5] = -1;
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  REQUIRE(cudaMemcpyPeerAsync(b, 1, a, 0, 64 * sizeof(float), s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(b[5] == -1.0f);
  CHECK(cudaMemcpyPeer(b, 9, a, 0, 4) == cudaErrorInvalidDevice);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST_CASE("MappedPinnedMemoryHasADevicePointerAndDeviceMemoryHasNone") {
  void* host = nullptr;
  REQUIRE(cudaHostAlloc(&host, 256, cudaHostAllocMapped) == cudaSuccess);
  void* dev = nullptr;
  REQUIRE(cudaHostGetDevicePointer(&dev, host, 0) == cudaSuccess);
  CHECK(dev == host);
  void* device_memory = nullptr;
  REQUIRE(cudaMalloc(&device_memory, 256) == cudaSuccess);
  CHECK(cudaHostGetDevicePointer(&dev, device_memory, 0) == cudaErrorInvalidValue);
  CHECK(cudaHostGetDevicePointer(&dev, host, 1) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFreeHost(host);
  cudaFree(device_memory);
}

TEST_CASE("PciBusIdsNameEachDeviceAndLeadBackToIt") {
  char id[32] = {};
  REQUIRE(cudaDeviceGetPCIBusId(id, sizeof id, 3) == cudaSuccess);
  CHECK(std::string(id) == "0000:61:00.0");
  int device = -1;
  REQUIRE(cudaDeviceGetByPCIBusId(&device, id) == cudaSuccess);
  CHECK(device == 3);
  CHECK(cudaDeviceGetByPCIBusId(&device, "not a bus id") == cudaErrorInvalidDevice);
  cudaGetLastError();
}

namespace {
std::atomic<int> host_calls{0};
void hostFunction(void* data) { host_calls += *static_cast<int*>(data); }
void streamCallback(cudaStream_t, cudaError_t status, void* data) {
  if (status == cudaSuccess) host_calls += *static_cast<int*>(data);
}
}  // namespace

TEST_CASE("HostFunctionsAndCallbacksRunInStreamOrder") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  int one = 1, ten = 10;
  REQUIRE(cudaLaunchHostFunc(s, &hostFunction, &one) == cudaSuccess);
  REQUIRE(cudaStreamAddCallback(s, &streamCallback, &ten, 0) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(host_calls.load() == 11);
  CHECK(cudaStreamAddCallback(s, &streamCallback, &ten, 3) == cudaErrorInvalidValue);
  CHECK(cudaLaunchHostFunc(s, nullptr, nullptr) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaStreamDestroy(s);
}
