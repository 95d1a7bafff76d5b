// Function attributes, occupancy and device-variable ("symbol") access. A sim kernel and
// an nvcc function answer alike, from the opaque-kernel model (opaque_kernel.h).
#include <cuda_runtime_api.h>

#include <cstring>
#include <optional>

#include "hangwatch/simgpu/cuda/device_symbols.h"
#include "hangwatch/simgpu/cuda/kernel_registry.h"
#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/opaque_kernel.h"

using simgpu::recordError;
namespace model = simgpu::opaque_kernel;

namespace {

std::optional<simgpu::KernelInfo> registered(const void* func) {
  if (func == nullptr) return std::nullopt;
  return simgpu::KernelRegistry::instance().find(func);
}

cudaError_t occupancy(int* numBlocks, const void* func, int blockSize, size_t dynamicSMemSize) {
  if (numBlocks == nullptr || blockSize <= 0) return recordError(cudaErrorInvalidValue);
  std::optional<simgpu::KernelInfo> kernel = registered(func);
  if (!kernel) return recordError(cudaErrorInvalidDeviceFunction);
  if (blockSize > 1024 || dynamicSMemSize > static_cast<size_t>(kernel->max_dynamic_shared)) {
    *numBlocks = 0;
    return cudaSuccess;
  }
  *numBlocks = model::activeBlocksPerSm(blockSize, dynamicSMemSize);
  return cudaSuccess;
}

// The variable behind `symbol` and the span [offset, offset + count) in it.
cudaError_t symbolSpan(const void* symbol, size_t count, size_t offset, char** at) {
  std::optional<simgpu::DeviceSymbol> variable = simgpu::DeviceSymbols::instance().find(symbol);
  if (!variable) return cudaErrorInvalidSymbol;
  if (offset > variable->size || count > variable->size - offset) return cudaErrorInvalidValue;
  *at = static_cast<char*>(variable->storage) + offset;
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (attr == nullptr) return recordError(cudaErrorInvalidValue);
  std::optional<simgpu::KernelInfo> kernel = registered(func);
  if (!kernel) return recordError(cudaErrorInvalidDeviceFunction);
  std::memset(attr, 0, sizeof(*attr));
  attr->maxThreadsPerBlock = 1024;
  attr->numRegs = model::kRegistersPerThread;
  attr->ptxVersion = 90;
  attr->binaryVersion = 90;
  attr->maxDynamicSharedSizeBytes = kernel->max_dynamic_shared;
  attr->preferredShmemCarveout = -1;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!registered(func)) return recordError(cudaErrorInvalidDeviceFunction);
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
      if (value < 0 || static_cast<size_t>(value) > model::kMaxDynamicSharedPerBlock)
        return recordError(cudaErrorInvalidValue);
      simgpu::KernelRegistry::instance().setMaxDynamicShared(func, value);
      return cudaSuccess;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      return value < -1 || value > 100 ? recordError(cudaErrorInvalidValue) : cudaSuccess;
    default:
      return cudaSuccess;  // cluster and scheduling hints: nothing to model
  }
}

cudaError_t cudaFuncSetCacheConfig(const void* func, cudaFuncCache cacheConfig) {
  return registered(func) ? cudaSuccess : recordError(cudaErrorInvalidDeviceFunction);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func, int blockSize,
                                                          size_t dynamicSMemSize) {
  return occupancy(numBlocks, func, blockSize, dynamicSMemSize);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, const void* func, int blockSize,
                                                                   size_t dynamicSMemSize, unsigned int flags) {
  if ((flags & ~cudaOccupancyDisableCachingOverride) != 0) return recordError(cudaErrorInvalidValue);
  return occupancy(numBlocks, func, blockSize, dynamicSMemSize);
}

// The most dynamic shared memory a block can have with numBlocks of them on one SM.
cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, const void* func, int numBlocks,
                                                      int blockSize) {
  if (dynamicSmemSize == nullptr || numBlocks <= 0 || blockSize <= 0) return recordError(cudaErrorInvalidValue);
  std::optional<simgpu::KernelInfo> kernel = registered(func);
  if (!kernel) return recordError(cudaErrorInvalidDeviceFunction);
  if (model::activeBlocksPerSm(blockSize, 0) < numBlocks) {
    *dynamicSmemSize = 0;
    return cudaSuccess;
  }
  const size_t per_block = model::kSharedPerSm / numBlocks - model::kReservedSharedPerBlock;
  *dynamicSmemSize = std::min(per_block, static_cast<size_t>(kernel->max_dynamic_shared));
  return cudaSuccess;
}

cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  if (devPtr == nullptr) return recordError(cudaErrorInvalidValue);
  std::optional<simgpu::DeviceSymbol> variable = simgpu::DeviceSymbols::instance().find(symbol);
  if (!variable) return recordError(cudaErrorInvalidSymbol);
  *devPtr = variable->storage;
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  if (size == nullptr) return recordError(cudaErrorInvalidValue);
  std::optional<simgpu::DeviceSymbol> variable = simgpu::DeviceSymbols::instance().find(symbol);
  if (!variable) return recordError(cudaErrorInvalidSymbol);
  *size = variable->size;
  return cudaSuccess;
}

// Symbol copies are ordinary copies to or from the variable's storage, in stream order.
cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                    cudaMemcpyKind kind, cudaStream_t stream) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return recordError(cudaErrorInvalidMemcpyDirection);
  char* at = nullptr;
  if (cudaError_t e = symbolSpan(symbol, count, offset, &at); e != cudaSuccess) return recordError(e);
  return cudaMemcpyAsync(at, src, count, kind, stream);
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      cudaMemcpyKind kind, cudaStream_t stream) {
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return recordError(cudaErrorInvalidMemcpyDirection);
  char* at = nullptr;
  if (cudaError_t e = symbolSpan(symbol, count, offset, &at); e != cudaSuccess) return recordError(e);
  return cudaMemcpyAsync(dst, at, count, kind, stream);
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               cudaMemcpyKind kind) {
  if (cudaError_t e = cudaMemcpyToSymbolAsync(symbol, src, count, offset, kind, nullptr); e != cudaSuccess) return e;
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind) {
  if (cudaError_t e = cudaMemcpyFromSymbolAsync(dst, symbol, count, offset, kind, nullptr); e != cudaSuccess)
    return e;
  return cudaStreamSynchronize(nullptr);
}

}  // extern "C"
