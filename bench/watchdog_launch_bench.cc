// Cost of cudaLaunchKernel over simgpu as the training job sees it. Run once plain
// and once with LD_PRELOAD=libhangwatch.so (bench/watchdog_bench.sh); the difference
// is what the watchdog adds per launch.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "hangwatch/simgpu/kernel.h"

namespace {

void noop(int) {}

// A launch the runtime accepts and runs: the sim's own enqueue dominates.
void BM_LaunchKernel(benchmark::State& state) {
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const void* kernel = simgpu::kernel<&noop>("noop");
  int arg = 0;
  void* args[] = {&arg};
  int64_t n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, stream));
    // Keeps the stream's queue short; the same cost with and without the library.
    if (++n % 256 == 0) cudaStreamSynchronize(stream);
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_LaunchKernel);

// A launch the runtime refuses right away (unknown function): almost only the call
// path is measured, so the interposer's share shows up undiluted.
void BM_LaunchKernelRejected(benchmark::State& state) {
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  static int not_a_kernel;
  for (auto _ : state)
    benchmark::DoNotOptimize(cudaLaunchKernel(&not_a_kernel, dim3(1), dim3(1), nullptr, 0, stream));
  cudaGetLastError();
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_LaunchKernelRejected);

// nvcc's <<<>>> path (__cudaLaunchKernel with a cudaKernel_t), refused at once.
extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
void BM_NvccLaunchRejected(benchmark::State& state) {
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  static int not_a_kernel;
  auto kernel = reinterpret_cast<cudaKernel_t>(&not_a_kernel);
  for (auto _ : state) benchmark::DoNotOptimize(__cudaLaunchKernel(kernel, dim3(1), dim3(1), nullptr, 0, stream));
  cudaGetLastError();
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_NvccLaunchRejected);

// A driver launch through the pointer cudaGetDriverEntryPoint handed out (Triton's way),
// refused at once: with the library preloaded that pointer is the watchdog's wrapper.
void BM_DriverEntryPointLaunchRejected(benchmark::State& state) {
  using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &status);
  auto launch = reinterpret_cast<LaunchFn>(fn);
  if (launch == nullptr) {
    state.SkipWithError("no cuLaunchKernel entry point");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
}
BENCHMARK(BM_DriverEntryPointLaunchRejected);

}  // namespace

BENCHMARK_MAIN();
