#include "hangwatch/common/rank_identity.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace hangwatch {
namespace {

std::optional<int> parseNonNegative(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > 1'000'000'000) return std::nullopt;
  return static_cast<int>(v);
}

struct LauncherVars {
  const char* rank;
  const char* local_rank;
  const char* world_size;
};

constexpr LauncherVars kLaunchers[] = {
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
};

}  // namespace

const char* envValue(const EnvLookup& env, const char* name) {
  const char* v = env ? env(name) : std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

RankIdentity detectRankIdentity(const EnvLookup& env) {
  auto get = [&](const char* name) -> const char* { return env ? env(name) : std::getenv(name); };
  RankIdentity id;
  for (const LauncherVars& l : kLaunchers) {
    std::optional<int> rank = parseNonNegative(get(l.rank));
    if (!rank) continue;
    id.rank = rank;
    id.local_rank = parseNonNegative(get(l.local_rank));
    id.world_size = parseNonNegative(get(l.world_size));
    id.source = l.rank;
    return id;
  }
  return id;
}

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace hangwatch
