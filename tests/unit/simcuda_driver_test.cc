// The driver API subset (simgpu's libcuda.so.1) answers from the emulated runtime: its devices,
// its primary contexts and the device it made current, as PyTorch's cuBLAS handle setup and
// device guards ask. Each test case runs in its own process (a fresh runtime).
#include <catch2/catch.hpp>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <thread>

TEST_CASE("DriverSeesTheRuntimesDevices") {
  int runtime_count = 0, driver_count = 0;
  REQUIRE(cudaGetDeviceCount(&runtime_count) == cudaSuccess);
  REQUIRE(cuInit(0) == CUDA_SUCCESS);
  CHECK(cuInit(1) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuDeviceGetCount(&driver_count) == CUDA_SUCCESS);
  CHECK(driver_count == runtime_count);
  CUdevice dev = -1;
  REQUIRE(cuDeviceGet(&dev, 2) == CUDA_SUCCESS);
  CHECK(dev == 2);
  CHECK(cuDeviceGet(&dev, driver_count) == CUDA_ERROR_INVALID_DEVICE);
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 2) == cudaSuccess);
  char name[256] = {};
  REQUIRE(cuDeviceGetName(name, sizeof(name), 2) == CUDA_SUCCESS);
  CHECK(std::string(name) == prop.name);
  int sms = 0, major = 0, minor = 0;
  REQUIRE(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 2) == CUDA_SUCCESS);
  CHECK(sms == prop.multiProcessorCount);
  REQUIRE(cuDeviceComputeCapability(&major, &minor, 2) == CUDA_SUCCESS);
  CHECK((major == prop.major && minor == prop.minor));
  size_t bytes = 0;
  REQUIRE(cuDeviceTotalMem(&bytes, 2) == CUDA_SUCCESS);
  CHECK(bytes == prop.totalGlobalMem);
  CUuuid uuid{};
  REQUIRE(cuDeviceGetUuid(&uuid, 2) == CUDA_SUCCESS);
  CHECK(std::memcmp(uuid.bytes, prop.uuid.bytes, sizeof(uuid.bytes)) == 0);
  char bus[32] = {};
  REQUIRE(cuDeviceGetPCIBusId(bus, sizeof(bus), 2) == CUDA_SUCCESS);
  CUdevice by_bus = -1;
  REQUIRE(cuDeviceGetByPCIBusId(&by_bus, bus) == CUDA_SUCCESS);
  CHECK(by_bus == 2);
  int version = 0;
  REQUIRE(cuDriverGetVersion(&version) == CUDA_SUCCESS);
  int runtime_driver = 0;
  REQUIRE(cudaDriverGetVersion(&runtime_driver) == cudaSuccess);
  CHECK(version == runtime_driver);
}

TEST_CASE("PrimaryContextIsActiveOnceTheRuntimeUsesTheDevice") {
  unsigned flags = 1;
  int active = -1;
  REQUIRE(cuDevicePrimaryCtxGetState(3, &flags, &active) == CUDA_SUCCESS);
  CHECK(active == 0);
  CHECK(flags == 0);
  CUcontext ctx = reinterpret_cast<CUcontext>(1);
  REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
  CHECK(ctx == nullptr);  // nothing has used the runtime's current device (0) yet

  REQUIRE(cudaSetDevice(3) == cudaSuccess);
  REQUIRE(cuDevicePrimaryCtxGetState(3, &flags, &active) == CUDA_SUCCESS);
  CHECK(active == 1);
  REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
  REQUIRE(ctx != nullptr);
  CUdevice dev = -1;
  REQUIRE(cuCtxGetDevice(&dev) == CUDA_SUCCESS);
  CHECK(dev == 3);
  REQUIRE(cuDevicePrimaryCtxGetState(4, &flags, &active) == CUDA_SUCCESS);
  CHECK(active == 0);
  void* p = nullptr;
  REQUIRE(cudaSetDevice(4) == cudaSuccess);
  REQUIRE(cudaMalloc(&p, 64) == cudaSuccess);
  REQUIRE(cuDevicePrimaryCtxGetState(4, &flags, &active) == CUDA_SUCCESS);
  CHECK(active == 1);
  cudaFree(p);
}

// PyTorch's getCurrentCUDABlasHandle on a thread with no current context
// (aten/src/ATen/cuda/CublasHandlePool.cpp): retain the primary context and make it current.
TEST_CASE("RetainingAndSettingAPrimaryContextMakesItsDeviceTheRuntimesCurrentOne") {
  std::thread([] {
    CUcontext ctx = nullptr;
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, 5) == CUDA_SUCCESS);
    unsigned flags = 0;
    int active = 0;
    REQUIRE(cuDevicePrimaryCtxGetState(5, &flags, &active) == CUDA_SUCCESS);
    CHECK(active == 1);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CUcontext current = nullptr;
    REQUIRE(cuCtxGetCurrent(&current) == CUDA_SUCCESS);
    CHECK(current == ctx);
    int device = -1;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    CHECK(device == 5);
    REQUIRE(cuDevicePrimaryCtxRelease(5) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(reinterpret_cast<CUcontext>(&flags)) == CUDA_ERROR_INVALID_CONTEXT);
  }).join();
  CHECK(cuDevicePrimaryCtxRelease(5) == CUDA_ERROR_INVALID_CONTEXT);  // released once already
}

TEST_CASE("ContextStackPushesAndPopsAboveTheRuntimesContext") {
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  CUcontext runtime_ctx = nullptr, six = nullptr, popped = nullptr;
  REQUIRE(cuCtxGetCurrent(&runtime_ctx) == CUDA_SUCCESS);
  REQUIRE(cuDevicePrimaryCtxRetain(&six, 6) == CUDA_SUCCESS);
  REQUIRE(cuCtxPushCurrent(six) == CUDA_SUCCESS);
  CUdevice dev = -1;
  REQUIRE(cuCtxGetDevice(&dev) == CUDA_SUCCESS);
  CHECK(dev == 6);
  REQUIRE(cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
  CHECK(popped == six);
  CUcontext now = nullptr;
  REQUIRE(cuCtxGetCurrent(&now) == CUDA_SUCCESS);
  CHECK(now == runtime_ctx);
  CHECK(cuCtxPushCurrent(nullptr) == CUDA_ERROR_INVALID_CONTEXT);
  REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
}

TEST_CASE("GetProcAddressGivesTheDriversFunctionsAndTheRuntimesLaunches") {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  REQUIRE(cuGetProcAddress("cuCtxGetCurrent", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS);
  CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
  CHECK(fn == reinterpret_cast<void*>(&cuCtxGetCurrent));
  // Versioned names resolve to the newest version, as cuda.h's macros do at compile time.
  REQUIRE(cuGetProcAddress("cuDevicePrimaryCtxRelease", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
          CUDA_SUCCESS);
  CHECK(fn == reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease_v2));
  void *legacy = nullptr, *per_thread = nullptr;
  REQUIRE(cuGetProcAddress("cuLaunchKernel", &legacy, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) ==
          CUDA_SUCCESS);
  REQUIRE(cuGetProcAddress("cuLaunchKernel", &per_thread, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                           &status) == CUDA_SUCCESS);
  CHECK(legacy != nullptr);
  CHECK(per_thread != nullptr);
  CHECK(legacy != per_thread);
  CHECK(cuGetProcAddress("cuNoSuchFunction", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
        CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CHECK(fn == nullptr);
  CHECK(cuGetProcAddress("cuCtxGetCurrent", &fn, 12000, 1u << 7, &status) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("ErrorNamesAndStringsAreTheDrivers") {
  const char* text = nullptr;
  REQUIRE(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &text) == CUDA_SUCCESS);
  CHECK(std::string(text) == "CUDA_ERROR_INVALID_VALUE");
  REQUIRE(cuGetErrorString(CUDA_ERROR_NOT_SUPPORTED, &text) == CUDA_SUCCESS);
  CHECK(std::string(text) == "operation not supported");
  CHECK(cuGetErrorString(static_cast<CUresult>(123456), &text) == CUDA_ERROR_INVALID_VALUE);
  CHECK(text == nullptr);
}
