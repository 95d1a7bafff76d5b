#pragma once
// Sim kernels: on simgpu a "kernel" is a host function `void(void** args)` that runs
// on the stream's worker thread. Like nvcc's __cudaRegisterFunction, each one is
// registered with its parameter sizes so cudaLaunchKernel can copy the arguments
// at launch time, and with a name for cudaFuncGetName.
//
//   void scale(float* x, size_t n, float a);
//   const void* k = simgpu::kernel<&scale>("scale");
//   void* args[] = {&x, &n, &a};
//   cudaLaunchKernel(k, grid, block, args, 0, stream);
#include <cuda_runtime_api.h>

#include <cstddef>
#include <tuple>
#include <utility>

extern "C" cudaError_t simgpuRegisterKernel(const void* entry, int nargs, const size_t* arg_sizes,
                                            const char* name);

namespace simgpu {

template <auto Fn>
struct KernelTrampoline;

template <typename... Args, void (*Fn)(Args...)>
struct KernelTrampoline<Fn> {
  static void entry(void** args) { call(args, std::index_sequence_for<Args...>{}); }

  template <size_t... I>
  static void call(void** args, std::index_sequence<I...>) {
    Fn(*static_cast<std::remove_reference_t<Args>*>(args[I])...);
  }

  static const void* registered(const char* name) {
    static const void* handle = [name] {
      constexpr size_t sizes[] = {sizeof(std::remove_reference_t<Args>)..., 0};
      simgpuRegisterKernel(reinterpret_cast<const void*>(&entry), static_cast<int>(sizeof...(Args)), sizes,
                           name);
      return reinterpret_cast<const void*>(&entry);
    }();
    return handle;
  }
};

// The launchable handle of host function Fn, registered on first use.
template <auto Fn>
const void* kernel(const char* name) {
  return KernelTrampoline<Fn>::registered(name);
}

}  // namespace simgpu
