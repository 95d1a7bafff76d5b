#pragma once
// Sim kernels registered by simgpuRegisterKernel: the nvcc-registration analogue
// that tells cudaLaunchKernel how many argument bytes to copy at launch time.
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace simgpu {

struct KernelInfo {
  std::string name;
  std::vector<size_t> arg_sizes;
};

class KernelRegistry {
 public:
  static KernelRegistry& instance();

  void add(const void* entry, KernelInfo info);
  std::optional<KernelInfo> find(const void* entry);
  // Name storage stays valid for the life of the process, as cudaFuncGetName promises.
  const char* name(const void* entry);

  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
  std::map<const void*, KernelInfo> kernels_;
};

}  // namespace simgpu
