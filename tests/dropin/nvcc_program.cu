// A CUDA program as users write them, built by nvcc against the real CUDA 13, cuBLAS and
// NCCL (-cudart shared) and run on simgpu through the drop-in folder: start-up queries,
// <<<>>> launches timed by events, a CUDA graph of them, __device__ and __managed__
// variables, occupancy, cuBLAS, NCCL, and calls simgpu does not emulate. Prints
// `key=value` lines that check_dropin.py checks.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CHECK(call)                                                          \
  do {                                                                       \
    cudaError_t e = (call);                                                  \
    if (e != cudaSuccess) {                                                  \
      std::printf("FAILED %s: %s\n", #call, cudaGetErrorName(e));            \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

__device__ int launches;
__managed__ int managed_value;

__global__ void touch(float* x) { x[threadIdx.x] += 1.0f; }

__global__ void scale(float* x, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
  if (i == 0) atomicAdd(&launches, 1);
}

static void startUpQueries() {
  int count = 0, driver = 0, runtime = 0;
  CHECK(cudaGetDeviceCount(&count));
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  char bus[32];
  CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0));
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::printf("devices=%d driver=%d runtime=%d\n", count, driver, runtime);
  std::printf("name=%s cc=%d.%d sms=%d total_mem=%zu pci=%s\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.totalGlobalMem, bus);
  std::printf("mem_info_ok=%d\n", free_bytes <= total_bytes && total_bytes == prop.totalGlobalMem ? 1 : 0);
}

static void kernels() {
  const int n = 1 << 20;
  float* x = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  cudaStream_t stream;
  cudaEvent_t start, stop;
  CHECK(cudaStreamCreate(&stream));
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  int zero = 0;
  CHECK(cudaMemcpyToSymbol(launches, &zero, sizeof(int)));
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < 10; ++i) scale<<<(n + 255) / 256, 256, 0, stream>>>(x, n, 2.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  const char* name = nullptr;
  CHECK(cudaFuncGetName(&name, reinterpret_cast<const void*>(scale)));
  int min_grid = 0, block = 0;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, scale));
  std::printf("kernel_ms=%.4f kernel_name=%s\n", ms, name);

  // The same launches captured into a CUDA graph and replayed.
  cudaStream_t capturing;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  CHECK(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 3; ++i) scale<<<(n + 255) / 256, 256, 0, capturing>>>(x, n, 0.5f);
  CHECK(cudaStreamEndCapture(capturing, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaEventRecord(start, capturing));
  CHECK(cudaGraphLaunch(exec, capturing));
  CHECK(cudaEventRecord(stop, capturing));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  std::printf("graph_ms=%.4f\n", ms);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(capturing));
  std::printf("occupancy_block=%d occupancy_min_grid=%d\n", block, min_grid);
  CHECK(cudaFree(x));
  CHECK(cudaStreamDestroy(stream));
}

static void libraries() {
  cublasHandle_t handle;
  const float alpha = 1, beta = 0;
  float *a = nullptr, *c = nullptr;
  CHECK(cudaMalloc(&a, 64 * 64 * sizeof(float)));
  CHECK(cudaMalloc(&c, 64 * 64 * sizeof(float)));
  cublasStatus_t s = cublasCreate(&handle);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &alpha, a, 64, a, 64, &beta, c, 64);
  std::printf("cublas_sgemm=%d\n", static_cast<int>(s));
  std::printf("cublas_unsupported=%d\n", static_cast<int>(cublasSetVector(1, 4, &alpha, 1, c, 1)));
  cublasLtMatrixTransformDesc_t transform;
  std::printf("cublaslt_unsupported=%d\n",
              static_cast<int>(cublasLtMatrixTransformDescCreate(&transform, CUDA_R_32F)));
  int version = 0;
  ncclGetVersion(&version);
  ncclComm_t comm;
  int dev = 0;
  ncclResult_t r = ncclCommInitAll(&comm, 1, &dev);
  if (r == ncclSuccess) r = ncclAllReduce(a, c, 16, ncclFloat, ncclSum, comm, nullptr);
  CHECK(cudaDeviceSynchronize());
  if (r == ncclSuccess) r = ncclCommDestroy(comm);
  std::printf("nccl_version=%d nccl_allreduce=%d\n", version, static_cast<int>(r));
}

// Two devices from one process, as a single-process multi-GPU job drives them: one NCCL
// communicator per device from ncclCommInitAll, a grouped AllReduce across them, and a host
// thread per device launching its own kernels.
static void severalDevices() {
  int devs[2] = {0, 1};
  ncclComm_t comms[2];
  ncclResult_t r = ncclCommInitAll(comms, 2, devs);
  float* buf[2];
  cudaStream_t streams[2];
  for (int i = 0; i < 2; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaMalloc(&buf[i], 256 * sizeof(float)));
    CHECK(cudaStreamCreate(&streams[i]));
  }
  if (r == ncclSuccess) r = ncclGroupStart();
  for (int i = 0; i < 2 && r == ncclSuccess; ++i)
    r = ncclAllReduce(buf[i], buf[i], 256, ncclFloat, ncclSum, comms[i], streams[i]);
  if (r == ncclSuccess) r = ncclGroupEnd();
  for (int i = 0; i < 2; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaStreamSynchronize(streams[i]));
  }
  std::printf("devices_nccl_allreduce=%d\n", static_cast<int>(r));
  int seen[2] = {-1, -1};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      CHECK(cudaSetDevice(i));
      for (int k = 0; k < 3; ++k) touch<<<1, 256, 0, streams[i]>>>(buf[i]);
      CHECK(cudaStreamSynchronize(streams[i]));
      CHECK(cudaGetDevice(&seen[i]));
    });
  }
  for (std::thread& t : threads) t.join();
  std::printf("thread_devices=%d,%d\n", seen[0], seen[1]);
  for (int i = 0; i < 2; ++i) {
    if (r == ncclSuccess) ncclCommDestroy(comms[i]);
    CHECK(cudaSetDevice(i));
    CHECK(cudaStreamDestroy(streams[i]));
    CHECK(cudaFree(buf[i]));
  }
  CHECK(cudaSetDevice(0));
}

// The driver as the runtime hands it out (cudaGetDriverEntryPointByVersion), which is how
// libraries that do not link libcuda reach it: a function simgpu's driver answers, and one it
// does not.
static void driverEntryPoints() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CHECK(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000, cudaEnableDefault, &found));
  unsigned flags = 0;
  int active = -1;
  if (found == cudaDriverEntryPointSuccess)
    reinterpret_cast<CUresult (*)(CUdevice, unsigned*, int*)>(fn)(0, &flags, &active);
  std::printf("driver_primary_active=%d\n", active);  // the runtime has used device 0 by now
  CHECK(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 12000, cudaEnableDefault, &found));
  CUresult r = found == cudaDriverEntryPointSuccess
                   ? reinterpret_cast<CUresult (*)(CUmemGenericAllocationHandle*, size_t,
                                                   const CUmemAllocationProp*, unsigned long long)>(fn)(
                         nullptr, 0, nullptr, 0)
                   : CUDA_ERROR_NOT_FOUND;
  std::printf("driver_unsupported=%d\n", static_cast<int>(r));
}

int main() {
  startUpQueries();
  driverEntryPoints();
  kernels();
  libraries();
  severalDevices();
  cudaArraySparseProperties sparse;
  std::printf("cudart_unsupported=%d\n", static_cast<int>(cudaArrayGetSparseProperties(&sparse, nullptr)));
  managed_value = 17;  // the host reaches a __managed__ variable through the runtime's storage
  int* managed_address = nullptr;
  CHECK(cudaGetSymbolAddress(reinterpret_cast<void**>(&managed_address), managed_value));
  std::printf("managed_symbol=%d\n", managed_address == &managed_value && *managed_address == 17 ? 1 : 0);
  int launched = 0;
  CHECK(cudaMemcpyFromSymbol(&launched, launches, sizeof(int)));
  std::printf("device_variable=%d\n", launched);  // 0: the device code did not run
  std::printf("done\n");
  return 0;
}
