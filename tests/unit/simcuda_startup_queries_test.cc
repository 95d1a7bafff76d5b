// The queries programs make before they start (device properties and attributes, memory,
// PCI ids, versions, peers, limits, flags, pinned and registered host memory), each as
// cuda_runtime_api.h documents it, answered for an H100 SXM5 in a DGX H100.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cctype>
#include <set>
#include <string>
#include <vector>

TEST_CASE("PropertiesDescribeAnH100AndAgreeWithTheAttributes") {
  cudaDeviceProp prop;
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(std::string(prop.name) == "NVIDIA H100 80GB HBM3");
  CHECK((prop.major == 9 && prop.minor == 0 && prop.multiProcessorCount == 132));
  const std::vector<std::pair<cudaDeviceAttr, long long>> pairs = {
      {cudaDevAttrMultiProcessorCount, prop.multiProcessorCount},
      {cudaDevAttrComputeCapabilityMajor, prop.major},
      {cudaDevAttrMaxSharedMemoryPerBlockOptin, static_cast<long long>(prop.sharedMemPerBlockOptin)},
      {cudaDevAttrMaxSharedMemoryPerMultiprocessor, static_cast<long long>(prop.sharedMemPerMultiprocessor)},
      {cudaDevAttrL2CacheSize, prop.l2CacheSize},
      {cudaDevAttrPciBusId, prop.pciBusID},
      {cudaDevAttrMaxThreadsPerMultiProcessor, prop.maxThreadsPerMultiProcessor},
      {cudaDevAttrCanMapHostMemory, prop.canMapHostMemory},
      {cudaDevAttrUnifiedAddressing, prop.unifiedAddressing},
      {cudaDevAttrEccEnabled, prop.ECCEnabled},
  };
  for (auto [attr, from_prop] : pairs) {
    int value = -1;
    REQUIRE(cudaDeviceGetAttribute(&value, attr, 0) == cudaSuccess);
    CHECK(value == from_prop);
  }
  CHECK(prop.sharedMemPerBlockOptin > prop.sharedMemPerBlock);
  CHECK((prop.persistingL2CacheMaxSize > 0 && prop.persistingL2CacheMaxSize <= prop.l2CacheSize));
}

TEST_CASE("UnknownAttributeAndDeviceFailAsDocumented") {
  int value = 0, count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(cudaDeviceGetAttribute(&value, static_cast<cudaDeviceAttr>(100000), 0) == cudaErrorInvalidValue);
  CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, count) == cudaErrorInvalidDevice);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, -1) == cudaErrorInvalidDevice);
  cudaGetLastError();
}

TEST_CASE("MemGetInfoReportsTheDeviceMemoryAndWhatIsInUse") {
  cudaDeviceProp prop;
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  size_t free_before = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  CHECK(total == prop.totalGlobalMem);
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, 1 << 20) == cudaSuccess);
  size_t free_after = 0;
  REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
  CHECK(free_before - free_after == (1 << 20));
  cudaFree(p);
}

TEST_CASE("PciBusIdsAreUpperCaseDistinctAndLeadBackToTheirDevice") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  std::set<std::string> seen;
  for (int d = 0; d < count; ++d) {
    char id[16] = {};
    REQUIRE(cudaDeviceGetPCIBusId(id, sizeof id, d) == cudaSuccess);
    std::string s(id);
    CHECK(s.size() == 12);  // "0000:1B:00.0": 13 characters with the terminator, as documented
    for (char c : s) CHECK(!std::islower(static_cast<unsigned char>(c)));
    seen.insert(s);
    int device = -1;
    REQUIRE(cudaDeviceGetByPCIBusId(&device, id) == cudaSuccess);
    CHECK(device == d);
  }
  CHECK(static_cast<int>(seen.size()) == count);
  char first[16] = {};
  REQUIRE(cudaDeviceGetPCIBusId(first, sizeof first, 0) == cudaSuccess);
  CHECK(std::string(first) == "0000:1B:00.0");
}

TEST_CASE("VersionsAreCuda13AndTheDriverIsNotOlderThanTheRuntime") {
  int driver = 0, runtime = 0;
  REQUIRE(cudaDriverGetVersion(&driver) == cudaSuccess);
  REQUIRE(cudaRuntimeGetVersion(&runtime) == cudaSuccess);
  CHECK(runtime / 1000 == 13);
  CHECK(driver >= runtime);
  CHECK(cudaDriverGetVersion(nullptr) == cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_CASE("PeerQueriesAnswerForPairsAndRejectADeviceWithItself") {
  int can = -1, value = -1;
  REQUIRE(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess);
  CHECK(can == 1);
  REQUIRE(cudaDeviceCanAccessPeer(&can, 1, 1) == cudaSuccess);
  CHECK(can == 0);
  REQUIRE(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 0, 1) == cudaSuccess);
  CHECK(value == 1);
  REQUIRE(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrPerformanceRank, 0, 1) == cudaSuccess);
  CHECK(value == 0);
  CHECK(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 2, 2) == cudaErrorInvalidDevice);
  CHECK(cudaDeviceGetP2PAttribute(&value, static_cast<cudaDeviceP2PAttr>(99), 0, 1) == cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_CASE("LimitsStartAtTheDefaultsAndKeepWhatIsSet") {
  size_t value = 0;
  REQUIRE(cudaDeviceGetLimit(&value, cudaLimitStackSize) == cudaSuccess);
  CHECK(value == 1024);
  REQUIRE(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64 << 20) == cudaSuccess);
  REQUIRE(cudaDeviceGetLimit(&value, cudaLimitMallocHeapSize) == cudaSuccess);
  CHECK(value == (64 << 20));
  CHECK(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 256) == cudaErrorInvalidValue);
  CHECK(cudaDeviceGetLimit(&value, static_cast<cudaLimit>(42)) == cudaErrorUnsupportedLimit);
  cudaGetLastError();
}

TEST_CASE("DeviceFlagsKeepWhatIsSetWithMapHostImplicit") {
  REQUIRE(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) == cudaSuccess);
  unsigned flags = 0;
  REQUIRE(cudaGetDeviceFlags(&flags) == cudaSuccess);
  CHECK(flags == (cudaDeviceScheduleBlockingSync | cudaDeviceMapHost));
  CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield) == cudaErrorInvalidValue);
  CHECK(cudaSetDeviceFlags(0x100) == cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_CASE("PinnedAndRegisteredHostMemoryIsMappedForTheDevice") {
  void* pinned = nullptr;
  REQUIRE(cudaHostAlloc(&pinned, 4096, cudaHostAllocPortable) == cudaSuccess);
  unsigned flags = 0;
  REQUIRE(cudaHostGetFlags(&flags, pinned) == cudaSuccess);
  CHECK(flags == (cudaHostAllocPortable | cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&pinned, 16, 0x40) == cudaErrorInvalidValue);

  std::vector<char> buffer(8192);
  REQUIRE(cudaHostRegister(buffer.data(), buffer.size(), cudaHostRegisterMapped) == cudaSuccess);
  CHECK(cudaHostRegister(buffer.data() + 100, 10, 0) == cudaErrorHostMemoryAlreadyRegistered);
  void* device = nullptr;
  REQUIRE(cudaHostGetDevicePointer(&device, buffer.data() + 8, 0) == cudaSuccess);
  CHECK(device == buffer.data() + 8);
  cudaPointerAttributes attr;
  REQUIRE(cudaPointerGetAttributes(&attr, buffer.data()) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeHost);
  CHECK(cudaFreeHost(buffer.data()) == cudaErrorInvalidValue);  // registered, not allocated
  REQUIRE(cudaHostUnregister(buffer.data()) == cudaSuccess);
  CHECK(cudaHostUnregister(buffer.data()) == cudaErrorHostMemoryNotRegistered);
  CHECK(cudaHostGetDevicePointer(&device, buffer.data(), 0) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFreeHost(pinned);
}
