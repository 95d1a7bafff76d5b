#include "hangwatch/simgpu/nccl/unique_id.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace simnccl {
namespace {

constexpr char kMagic[8] = {'S', 'I', 'M', 'N', 'C', 'C', 'L', '1'};

ncclUniqueId idFor(const std::string& name) {
  ncclUniqueId id{};
  std::memcpy(id.internal, kMagic, sizeof(kMagic));
  std::strncpy(id.internal + sizeof(kMagic), name.c_str(), sizeof(id.internal) - sizeof(kMagic) - 1);
  return id;
}

}  // namespace

ncclUniqueId makeUniqueId() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  return idFor(fmt::format("/simnccl-{}-{}-{:08x}{:08x}", ::getpid(), counter++, rd(), rd()));
}

ncclUniqueId derivedUniqueId(const std::string& parent_name, const std::string& suffix) {
  return idFor(parent_name.substr(0, 80) + suffix);
}

hangwatch::Expected<std::string> segmentNameFromId(const ncclUniqueId& id) {
  if (std::memcmp(id.internal, kMagic, sizeof(kMagic)) != 0)
    return hangwatch::Error{"not a simnccl unique id (was it made by ncclGetUniqueId of simnccl?)"};
  const char* name = id.internal + sizeof(kMagic);
  size_t len = strnlen(name, sizeof(id.internal) - sizeof(kMagic));
  if (len == 0 || len == sizeof(id.internal) - sizeof(kMagic) || name[0] != '/')
    return hangwatch::Error{"corrupt simnccl unique id"};
  return std::string(name, len);
}

}  // namespace simnccl
