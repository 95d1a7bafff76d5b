#pragma once
// User-defined reduction operators (ncclRedOpCreatePreMulSum): each rank's input is
// multiplied by a scalar, then summed. The scalar is read at creation
// (ncclScalarHostImmediate) or when the collective runs (ncclScalarDevice).
#include <nccl.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace simnccl {

struct PreMulSum {
  ncclDataType_t dtype;
  ncclScalarResidence_t residence;
  const void* device_scalar = nullptr;  // ncclScalarDevice: read when the collective runs
  double immediate = 0;                 // ncclScalarHostImmediate: read at creation

  double scalar() const;
  // dst[i] = scalar * src[i] in `dtype`.
  void scale(void* dst, const void* src, size_t count) const;
};

// One communicator's operators; ids start at ncclNumOps, as NCCL's do.
class CustomRedOps {
 public:
  ncclRedOp_t add(PreMulSum op);
  bool remove(ncclRedOp_t id);
  std::shared_ptr<const PreMulSum> find(ncclRedOp_t id) const;

 private:
  mutable std::mutex mutex_;
  int next_ = ncclNumOps;
  std::map<int, std::shared_ptr<const PreMulSum>> ops_;
};

// Reads one element of `dtype` as double, and writes one back.
double loadElement(const void* p, ncclDataType_t dtype);
void storeElement(void* p, ncclDataType_t dtype, double v);

}  // namespace simnccl
