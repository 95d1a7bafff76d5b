// Cost of cudaLaunchKernel over simgpu as the training job sees it. Run once plain
// and once with LD_PRELOAD=libhangwatch.so (bench/watchdog_bench.sh); the difference
// is what the watchdog adds per launch.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include "simgpu/kernel.h"

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

}  // namespace

BENCHMARK_MAIN();
