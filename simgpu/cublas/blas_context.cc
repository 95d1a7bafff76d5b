#include "hangwatch/simgpu/cublas/blas_context.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace simgpu {
namespace {

struct LiveContexts {
  std::mutex mutex;
  std::unordered_map<cublasHandle_t, std::unique_ptr<cublasContext>> contexts;
};

LiveContexts& live() {
  // Leaked: handles may be destroyed from user static destructors.
  static LiveContexts* contexts = new LiveContexts();
  return *contexts;
}

}  // namespace

cublasHandle_t createBlasContext(int device) {
  auto context = std::make_unique<cublasContext>();
  context->device = device;
  cublasHandle_t handle = context.get();
  std::lock_guard lock(live().mutex);
  live().contexts.emplace(handle, std::move(context));
  return handle;
}

bool destroyBlasContext(cublasHandle_t handle) {
  std::lock_guard lock(live().mutex);
  return live().contexts.erase(handle) == 1;
}

cublasContext* liveBlasContext(cublasHandle_t handle) {
  std::lock_guard lock(live().mutex);
  auto it = live().contexts.find(handle);
  return it == live().contexts.end() ? nullptr : it->second.get();
}

}  // namespace simgpu
