// A library that calls every CUDA, cuBLAS and NCCL entry point libhangwatch.so
// interposes, the way a user library would (through its own PLT), and prints for each
// call its return code, errno and the thread's CUDA "last error". Run with and without
// the watchdog preloaded, the two transcripts must be identical: the watchdog may
// observe a call, never change what the caller sees. Built twice: against the real
// libraries in /usr/local/cuda (no driver: they answer with error codes) and against simgpu.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

// cudaGetDriverEntryPoint is deprecated but still what many programs call.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <cerrno>
#include <cstdio>
#include <cstring>

// Entry points the headers declare only for nvcc or per-thread-default-stream builds.
extern "C" {
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*);
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
}

namespace {

FILE* g_out = stdout;
int g_step = 0;

void report(const char* what, long rc) {
  const int err = errno;
  const cudaError_t last = cudaPeekAtLastError();
  std::fprintf(g_out, "%02d %-34s rc=%ld errno=%d last=%d\n", ++g_step, what, rc, err, static_cast<int>(last));
}

#define CALL(expr)        \
  do {                    \
    errno = 0;            \
    long rc_ = (expr);    \
    report(#expr, rc_);   \
  } while (0)

// A host function that is not a registered kernel: every launch of it is an error
// the caller must see unchanged.
void notAKernel(void**) {}

// The sim kernel the simgpu build registers (a host function run on the stream).
void addOne(void** args) {
  float* p = *static_cast<float**>(args[0]);
  p[0] += 1.0f;
}

// The per-thread stream runs beside `stream`: its work gets a slot of its own.
constexpr int kPerThreadSlot = 512;

}  // namespace

#ifdef PASSTHROUGH_SIMGPU
extern "C" cudaError_t simgpuRegisterKernel(const void* entry, int nargs, const size_t* arg_sizes, const char* name);
#endif

extern "C" __attribute__((visibility("default"))) int passthrough_run(FILE* out) {
  g_out = out;
  g_step = 0;
  const void* kernel = reinterpret_cast<const void*>(&notAKernel);
#ifdef PASSTHROUGH_SIMGPU
  const size_t sizes[] = {sizeof(float*)};
  simgpuRegisterKernel(reinterpret_cast<const void*>(&addOne), 1, sizes, "addOne");
  kernel = reinterpret_cast<const void*>(&addOne);
#endif
  int devices = -1;
  CALL(cudaGetDeviceCount(&devices));
  CALL(cudaSetDevice(0));
  float* buf = nullptr;
  CALL(cudaMalloc(reinterpret_cast<void**>(&buf), 4096));
  cudaStream_t stream = nullptr;
  CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t event = nullptr;
  CALL(cudaEventCreate(&event));
  float host[4] = {1, 2, 3, 4};

  // Async work on a user stream, on the legacy stream and on the per-thread stream.
  void* args[] = {&buf};
  float* per_thread_slot = buf == nullptr ? nullptr : buf + kPerThreadSlot;
  void* per_thread_args[] = {&per_thread_slot};
  CALL(cudaMemcpyAsync(buf, host, sizeof host, cudaMemcpyHostToDevice, stream));
  CALL(cudaMemcpyAsync_ptsz(per_thread_slot, host, sizeof host, cudaMemcpyHostToDevice, nullptr));
  for (int i = 0; i < 3; ++i) CALL(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, stream));
  CALL(cudaLaunchKernel(reinterpret_cast<const void*>(&notAKernel), dim3(1), dim3(1), args, 0, stream));
  CALL(cudaLaunchKernel(kernel, dim3(0), dim3(1), args, 0, nullptr));
  CALL(cudaLaunchKernel_ptsz(kernel, dim3(1), dim3(1), per_thread_args, 0, nullptr));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(1);
  config.stream = stream;
  CALL(cudaLaunchKernelExC(&config, kernel, args));
  CALL(cudaLaunchKernelExC(nullptr, kernel, args));
  CALL(cudaLaunchKernelExC_ptsz(&config, kernel, args));  // config names `stream`
  cudaKernel_t handle = nullptr;
  CALL(__cudaGetKernel(&handle, kernel));
  CALL(__cudaLaunchKernel(handle, dim3(1), dim3(1), args, 0, stream));
  CALL(__cudaLaunchKernel_ptsz(handle, dim3(1), dim3(1), per_thread_args, 0, nullptr));
  CALL(cudaEventRecord(event, stream));
  CALL(cudaStreamWaitEvent(nullptr, event, 0));
  CALL(cudaEventSynchronize(event));
  CALL(cudaStreamSynchronize(stream));
  CALL(cudaStreamSynchronize_ptsz(nullptr));
  CALL(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(0x7777)));
  CALL(cudaDeviceSynchronize());

  // Driver entry points reached without the PLT (Triton, CUTLASS, cuBLASLt).
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  CALL(cudaGetDriverEntryPoint("cuLaunchKernel", &entry, cudaEnableDefault, &status));
  std::fprintf(out, "   cuLaunchKernel found=%d status=%d\n", entry != nullptr, static_cast<int>(status));
  CALL(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &entry, 12000, cudaEnableDefault, &status));
  CALL(cudaGetDriverEntryPoint_ptsz("cuLaunchKernel", &entry, cudaEnableDefault, &status));
  CALL(cudaGetDriverEntryPoint("cuNoSuchFunction", &entry, cudaEnableDefault, &status));
  std::fprintf(out, "   cuNoSuchFunction found=%d status=%d\n", entry != nullptr, static_cast<int>(status));

  // cuBLAS: a handle on the stream, then each interposed GEMM.
  cublasHandle_t blas = nullptr;
  CALL(cublasCreate(&blas));
  CALL(cublasSetStream(blas, stream));
  const float one = 1.0f, zero = 0.0f;
  CALL(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, 2, buf, 2, &zero, buf + 8, 2));
  CALL(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, CUDA_R_32F, 2, buf, CUDA_R_32F, 2, &zero,
                    buf + 8, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  CALL(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, CUDA_R_32F, 2, 4, buf,
                                  CUDA_R_32F, 2, 4, &zero, buf + 16, CUDA_R_32F, 2, 4, 2, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  CALL(cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, 2, buf, 2, &zero, buf + 8, 2));
  CALL(cublasDestroy(blas));
#ifndef PASSTHROUGH_SIMGPU
  cublasLtHandle_t lt = nullptr;
  CALL(cublasLtCreate(&lt));
  CALL(cublasLtMatmul(lt, nullptr, &one, buf, nullptr, buf, nullptr, &zero, buf, nullptr, buf, nullptr, nullptr,
                      nullptr, 0, stream));
  if (lt != nullptr) CALL(cublasLtDestroy(lt));
#endif

  // NCCL: a one-rank communicator, a collective, p2p in a group, and the calls the
  // watchdog only watches (init variants, split, abort, destroy).
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  CALL(ncclGetUniqueId(&id));
  ncclComm_t comm = nullptr;
  CALL(ncclCommInitRank(&comm, 1, id, 0));
  CALL(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, stream));
  CALL(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, nullptr, stream));
  CALL(ncclBroadcast(buf, buf, 4, ncclFloat, 0, comm, stream));
  CALL(ncclGroupStart());
  CALL(ncclSend(buf, 4, ncclFloat, 0, comm, stream));
  CALL(ncclRecv(buf + 4, 4, ncclFloat, 0, comm, stream));
  CALL(ncclGroupEnd());
  CALL(ncclGroupStart());
  CALL(ncclAllGather(buf, buf + 8, 4, ncclFloat, comm, stream));
  CALL(ncclGroupEnd());
  CALL(cudaStreamSynchronize(stream));
  ncclComm_t child = nullptr;
  CALL(ncclCommSplit(comm, 0, 0, &child, nullptr));
  if (child != nullptr) {
    CALL(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, child, stream));
    CALL(cudaStreamSynchronize(stream));
    CALL(ncclCommDestroy(child));
  }
  CALL(ncclCommSplit(nullptr, 0, 0, &child, nullptr));
  if (comm != nullptr) CALL(ncclCommFinalize(comm));
  if (comm != nullptr) CALL(ncclCommDestroy(comm));
  comm = nullptr;
  CALL(ncclCommAbort(nullptr));
  CALL(ncclCommInitRank(&comm, 2, id, 5));
  CALL(ncclGroupStart());
  CALL(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, stream));
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CALL(ncclGroupSimulateEnd(&sim));
  void* nccl_buf = nullptr;
  CALL(ncclMemAlloc(&nccl_buf, 1 << 20));
  if (nccl_buf != nullptr) CALL(ncclMemFree(nccl_buf));
#ifndef PASSTHROUGH_SIMGPU
  // Called by the program, never by the watchdog (not interposed): they must reach NCCL as they are.
  void* reg = nullptr;
  CALL(ncclCommRegister(comm, buf, 4096, &reg));
  ncclComm_t scalable = nullptr;
  CALL(ncclCommInitRankScalable(&scalable, 1, 0, 1, &id, nullptr));
#endif

  CALL(cudaStreamSynchronize_ptsz(nullptr));
  float result[2] = {-1.0f, -1.0f};
  CALL(cudaMemcpy(&result[0], buf, sizeof(float), cudaMemcpyDeviceToHost));
  CALL(cudaMemcpy(&result[1], per_thread_slot, sizeof(float), cudaMemcpyDeviceToHost));
  std::fprintf(out, "   on the stream %g, on the per-thread stream %g\n", static_cast<double>(result[0]),
               static_cast<double>(result[1]));
  CALL(cudaGetLastError());
  CALL(cudaStreamDestroy(stream));
  CALL(cudaEventDestroy(event));
  CALL(cudaFree(buf));
  return 0;
}
