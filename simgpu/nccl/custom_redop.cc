#include "hangwatch/simgpu/nccl/custom_redop.h"

#include <cstdint>
#include <cstring>

#include "hangwatch/simgpu/nccl/reduction.h"
#include "hangwatch/simgpu/numeric_formats.h"

namespace simnccl {

double loadElement(const void* p, ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: return *static_cast<const int8_t*>(p);
    case ncclUint8: return *static_cast<const uint8_t*>(p);
    case ncclInt32: return *static_cast<const int32_t*>(p);
    case ncclUint32: return *static_cast<const uint32_t*>(p);
    case ncclInt64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case ncclUint64: return static_cast<double>(*static_cast<const uint64_t*>(p));
    case ncclFloat32: return *static_cast<const float*>(p);
    case ncclFloat64: return *static_cast<const double*>(p);
    case ncclFloat16: return simgpu::halfToFloat(*static_cast<const uint16_t*>(p));
    case ncclBfloat16: return simgpu::bf16ToFloat(*static_cast<const uint16_t*>(p));
    default: return 0;
  }
}

void storeElement(void* p, ncclDataType_t dtype, double v) {
  switch (dtype) {
    case ncclInt8: *static_cast<int8_t*>(p) = static_cast<int8_t>(v); return;
    case ncclUint8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); return;
    case ncclInt32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); return;
    case ncclUint32: *static_cast<uint32_t*>(p) = static_cast<uint32_t>(v); return;
    case ncclInt64: *static_cast<int64_t*>(p) = static_cast<int64_t>(v); return;
    case ncclUint64: *static_cast<uint64_t*>(p) = static_cast<uint64_t>(v); return;
    case ncclFloat32: *static_cast<float*>(p) = static_cast<float>(v); return;
    case ncclFloat64: *static_cast<double*>(p) = v; return;
    case ncclFloat16: *static_cast<uint16_t*>(p) = simgpu::floatToHalf(static_cast<float>(v)); return;
    case ncclBfloat16: *static_cast<uint16_t*>(p) = simgpu::floatToBf16(static_cast<float>(v)); return;
    default: return;
  }
}

double PreMulSum::scalar() const {
  return residence == ncclScalarDevice ? loadElement(device_scalar, dtype) : immediate;
}

void PreMulSum::scale(void* dst, const void* src, size_t count) const {
  const double s = scalar();
  const size_t esize = dtypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const void* in = static_cast<const char*>(src) + i * esize;
    storeElement(static_cast<char*>(dst) + i * esize, dtype, s * loadElement(in, dtype));
  }
}

ncclRedOp_t CustomRedOps::add(PreMulSum op) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int id = next_++;
  ops_.emplace(id, std::make_shared<const PreMulSum>(op));
  return static_cast<ncclRedOp_t>(id);
}

bool CustomRedOps::remove(ncclRedOp_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ops_.erase(static_cast<int>(id)) == 1;
}

std::shared_ptr<const PreMulSum> CustomRedOps::find(ncclRedOp_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ops_.find(static_cast<int>(id));
  return it == ops_.end() ? nullptr : it->second;
}

}  // namespace simnccl
