// Kernel launches: a sim kernel is a registered host function `void(void**)` run on
// the stream's worker. Argument values are copied at launch, as real CUDA does, so
// the caller may change its variables right after the launch returns.
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernel_registry.h"
#include "last_error.h"
#include "runtime.h"
#include "simgpu/kernel.h"

using simgpu::recordError;
using simgpu::Runtime;

namespace {

using KernelEntry = void (*)(void**);

// The launch's copy of the argument values, each at a 16-byte aligned offset.
struct ArgumentPack {
  std::vector<size_t> offsets;
  std::unique_ptr<unsigned char[]> bytes;

  ArgumentPack(const std::vector<size_t>& sizes, void** args) {
    size_t total = 0;
    for (size_t size : sizes) {
      offsets.push_back(total);
      total += (size + 15) / 16 * 16;
    }
    bytes = std::make_unique<unsigned char[]>(total == 0 ? 1 : total);
    for (size_t i = 0; i < sizes.size(); ++i) std::memcpy(bytes.get() + offsets[i], args[i], sizes[i]);
  }

  std::vector<void*> pointers() {
    std::vector<void*> p;
    for (size_t offset : offsets) p.push_back(bytes.get() + offset);
    return p;
  }
};

bool validDim(dim3 d) { return d.x > 0 && d.y > 0 && d.z > 0; }

cudaError_t launch(const void* func, dim3 grid, dim3 block, void** args, cudaStream_t stream) {
  std::optional<simgpu::KernelInfo> kernel = simgpu::KernelRegistry::instance().find(func);
  if (!kernel) return recordError(cudaErrorInvalidDeviceFunction);
  if (!validDim(grid) || !validDim(block) || block.x * block.y * block.z > 1024)
    return recordError(cudaErrorInvalidConfiguration);
  if (!kernel->arg_sizes.empty() && args == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  auto pack = std::make_shared<ArgumentPack>(kernel->arg_sizes, args);
  auto entry = reinterpret_cast<KernelEntry>(const_cast<void*>(func));
  simgpu::DeviceWork work = [pack, entry] {
    std::vector<void*> pointers = pack->pointers();
    entry(pointers.data());
  };
  rt.device(s->device()).enqueue(*s, simgpu::StreamTask{std::move(kernel->name), std::move(work), {}});
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t simgpuRegisterKernel(const void* entry, int nargs, const size_t* arg_sizes, const char* name) {
  if (entry == nullptr || nargs < 0 || (nargs > 0 && arg_sizes == nullptr)) return recordError(cudaErrorInvalidValue);
  simgpu::KernelInfo info{name != nullptr ? name : "simgpu_kernel", std::vector<size_t>(arg_sizes, arg_sizes + nargs)};
  simgpu::KernelRegistry::instance().add(entry, std::move(info));
  return cudaSuccess;
}

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  if (name == nullptr || func == nullptr) return recordError(cudaErrorInvalidValue);
  const char* registered = simgpu::KernelRegistry::instance().name(func);
  if (registered == nullptr) return recordError(cudaErrorInvalidDeviceFunction);
  *name = registered;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                             cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, stream);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  if (config == nullptr) return recordError(cudaErrorInvalidValue);
  return launch(func, config->gridDim, config->blockDim, args, config->stream);
}

}  // extern "C"
