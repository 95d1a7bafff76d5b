// A kernel that spins on a host-mapped flag until the host releases it: the smallest
// real-GPU hang the watchdog must detect (tests/gpu/run.sh, check "kernel-hang").
//   spin_on_flag SECONDS   (releases the flag after SECONDS; prints "released" and exits 0)
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

__global__ void spinOnFlag(volatile int* flag) {
  while (*flag == 0) {
  }
}

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 10;
  int* flag = nullptr;
  if (cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int), cudaHostAllocMapped) != cudaSuccess) {
    std::fprintf(stderr, "cudaHostAlloc failed\n");
    return 2;
  }
  *flag = 0;
  int* device_flag = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  spinOnFlag<<<1, 1, 0, stream>>>(device_flag);
  std::printf("spinning for %d s\n", seconds);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  *reinterpret_cast<volatile int*>(flag) = 1;
  cudaError_t rc = cudaStreamSynchronize(stream);
  std::printf("released: %s\n", cudaGetErrorString(rc));
  return rc == cudaSuccess ? 0 : 1;
}
