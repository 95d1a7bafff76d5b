#include "hangwatch/simgpu/nccl/unique_id.h"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <random>
#include <string_view>

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

std::optional<pid_t> bootstrapRootPid(const std::string& segment_name) {
  constexpr std::string_view kPrefix = "/simnccl-";
  if (segment_name.rfind(kPrefix, 0) != 0 || segment_name.find('.') != std::string::npos) return std::nullopt;
  pid_t pid = 0;
  const char* first = segment_name.data() + kPrefix.size();
  const char* last = segment_name.data() + segment_name.size();
  auto [end, ec] = std::from_chars(first, last, pid);
  if (ec != std::errc() || end == first || end == last || *end != '-' || pid <= 0) return std::nullopt;
  return pid;
}

}  // namespace simnccl
